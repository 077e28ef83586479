// A script to trace (trace_test): a task, an actor's calls and a typed CAF
// actor's request on another node of the cluster, if it has one, a task
// here, and a span of its own;
// lumen::shutdown then writes the timeline. Its flags are lumen::init's:
//   traced_job --local-nodes 1 --trace run.json

#include <chrono>
#include <iostream>
#include <string>

#include <lumen/caf_interop.hpp>
#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>

#include "cluster_job.hpp"

int main(int argc, char** argv) {
  constexpr auto deadline = std::chrono::seconds(30);
  lumen::init(argc, argv);
  auto there = lumen::this_node_id();
  for (auto& n : lumen::nodes())
    if (n.alive && n.id != lumen::this_node_id() && n.id != "head") {
      there = n.id;
      break;
    }
  {
    lumen::trace::span script{"script", "user"};
    auto five =
      lumen::get(lumen::task(add).on_node(there).remote(2, 3), deadline);
    auto counter = lumen::actor<Counter>(five).on_node(there).remote();
    lumen::get(counter.call(&Counter::add, 1), deadline);
    auto seven = lumen::get(counter.call(&Counter::add, 1), deadline);
    auto two = lumen::get(lumen::task(add).remote(1, 1), deadline);
    auto calc = lumen::spawn_on<calculator>(there, "calculator");
    auto three = lumen::get(lumen::call(calc, add_atom::value, 1, 2), deadline);
    std::cout << "traced_job: ran on " << there << ": " << seven + two + three
              << std::endl;
  }
  lumen::shutdown();
}
