// A script of a cluster whose nodes run job.cpp's code, loaded with
// `lumen start --code-path libjob.so`: it places the remote function and an
// actor on a node other than the head, and checks what comes back. Run by
// run_cluster.sh as
//   ./driver --address=HOST:PORT
// it prints "driver: ok, ..." and exits 0, or says what differed and exits 1.
#include <chrono>
#include <iostream>
#include <string>

#include <lumen/lumen.hpp>

#include "job.hpp"

int main(int argc, char** argv) {
  lumen::init(argc, argv); // --address=HOST:PORT joins the cluster there
  std::string node;
  for (auto& n : lumen::nodes())
    if (n.alive && n.id != "head")
      node = n.id;
  if (node.empty()) {
    std::cerr << "driver: the cluster has no node besides the head\n";
    lumen::shutdown();
    return 1;
  }
  // A loaded machine answers in well under a second; a lost node fails the
  // call, and a hang ends here rather than in ctest's timeout.
  auto deadline = std::chrono::seconds(30);
  // [driver-calls]
  auto squared = lumen::task(square_on_node).on_node(node).remote(7);
  auto tally = lumen::actor<Tally>().on_node(node).remote();
  for (int i = 1; i <= 10; ++i)
    tally.call(&Tally::add, i);
  auto total = tally.call(&Tally::add, 0);
  auto host = tally.call(&Tally::node);
  // [/driver-calls]
  auto got_squared = lumen::get(squared, deadline);
  auto got_total = lumen::get(total, deadline);
  auto got_host = lumen::get(host, deadline);
  lumen::shutdown();
  auto want_squared = "7 squared is 49 on " + node;
  if (got_squared != want_squared || got_total != 55 || got_host != node) {
    std::cerr << "driver: expected \"" << want_squared << "\", 55 and " << node
              << "; got \"" << got_squared << "\", " << got_total << " and "
              << got_host << "\n";
    return 1;
  }
  std::cout << "driver: ok, " << got_squared << "; Tally on " << got_host
            << " counted " << got_total << "\n";
  return 0;
}
