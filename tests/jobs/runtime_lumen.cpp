// The `lumen` command as the runtime alone makes it: start, status and stop,
// without the ML layer's verbs. The runtime's multi-process suites start this
// one, so that they build and pass where actors/ does not exist.
#include <lumen/cli.hpp>

int main(int argc, char** argv) {
  return lumen::cli_main(argc, argv);
}
