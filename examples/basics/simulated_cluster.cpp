// A simulated cluster: the same script, run on simulated nodes in virtual
// time, the same way every time for the same seed.
//
// Teaches: `--simulate=SEED` runs a Lumen script in one process on
// simulated nodes; work costs virtual time only for its messages and for
// the compute it charges (lumen::sim::charge), a slow node (`--sim-slow`)
// takes longer, and `lumen::wait` sees answers in the order they arrive;
// `--sim-log` writes every event, the same file for the same seed.
//
// Run:   ./.build/examples/basics/simulated_cluster --simulate=7
//          --sim-nodes=4 --sim-slow=node-3=3 --sim-log=run.jsonl
// Prints each answer as it arrives, with the virtual time, then
// "simulated: 6 answers, the slowest from node-3" and
// "simulated_cluster: all steps ok".

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/sim.hpp>

// [charged-work]
// A step of work that takes 20 ms of compute on a normal node: in a
// simulated run the node's clock moves by what the work charges.
std::string work(int step) {
  lumen::trace::span s{"compute"}; // in --trace's timeline, virtual time
  s.arg("step", step);
  lumen::sim::charge(std::chrono::milliseconds(20));
  return lumen::this_node_id() + " did step " + std::to_string(step);
}
LUMEN_REMOTE(work);
// [/charged-work]

int main(int argc, char** argv) {
  lumen::init(argc, argv);
  if (!lumen::sim::active()) {
    std::cerr << "run me with --simulate[=SEED]\n";
    return 2;
  }
  auto ms = [] {
    return std::to_string(lumen::sim::now().count() / 1e6) + " ms";
  };
  // [spread-and-wait]
  // Six steps spread over the nodes (each runs again elsewhere if its
  // node dies, twice at most); answers come back as they finish.
  std::vector<lumen::ObjectRef<std::string>> pending;
  for (int step = 0; step < 6; ++step)
    pending.push_back(
      lumen::task(work).spread().with_max_retries(2).remote(step));
  std::string last;
  int answers = 0;
  while (!pending.empty()) {
    auto [ready, rest] = lumen::wait(pending, 1);
    last = lumen::get(ready[0]);
    std::cout << "at " << ms() << ": " << last << "\n";
    pending = rest;
    ++answers;
  }
  // [/spread-and-wait]
  std::cout << "simulated: " << answers << " answers, the slowest from "
            << last.substr(0, last.find(' ')) << "\n";
  std::cout << "simulated_cluster: all steps ok\n";
  lumen::shutdown();
  return 0;
}
