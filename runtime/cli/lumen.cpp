// The `lumen` command: starts heads and nodes, shows and stops them.
#include <lumen/cli.hpp>

int main(int argc, char** argv) {
  return lumen::cli_main(argc, argv);
}
