// ml_scratch01b: the server and the workers as Lumen actors — the
// reference: 01b_starter.cpp with its TODOs done, in server_and_workers.hpp
// (part 01c runs them too).

#include "server_and_workers.hpp"

int main(int argc, char** argv) {
  return scratch01::part_b::main<scratch01::ParameterServer,
                                 scratch01::DataParallelWorker>(argc, argv);
}
