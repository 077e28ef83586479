// The `lumen` command: starts heads and nodes, shows and stops them, and
// trains (`lumen train`, from the ML layer, which links in here and only
// here: the runtime library knows nothing of it), runs the exercises
// (`lumen exercises`) and finds their pages in the browser playground.
#include <lumen/cli.hpp>
#include <lumen/train/fashion_mnist.hpp>

#include "doctor.hpp"
#include "exercises.hpp"
#include "playground.hpp"

int main(int argc, char** argv) {
  return lumen::cli_main(
    argc, argv,
    {lumen::train::train_verb(), lumen::cli::exercises_verb(),
     lumen::cli::doctor_verb(), lumen::cli::playground_verb()});
}
