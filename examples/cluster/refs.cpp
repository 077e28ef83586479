// Refs and handles are values: an actor's handle and a list of refs handed
// to a task on another node, as Ray tasks take them.
//
// Teaches: which refs a task gets resolved (a ref for a T parameter) and
// which it reads itself (refs inside a container, an ObjectRef parameter);
// an actor living in the script called from a node; and a tensor made on
// one node and read on another, going from the one to the other and not
// through the script.
//
// Run, in two terminals: the cluster (a head and a node) in the first,
//   ./.build/examples/cluster/refs start --head --block &
//   ./.build/examples/cluster/refs start --address 127.0.0.1:6380 --block
// the script in the second:
//   ./.build/examples/cluster/refs --address=127.0.0.1:6380
// Or alone, with node processes of its own:
//   ./.build/examples/cluster/refs --local-nodes=2
// The script prints "tally_all = 6", "mean of the head's tensor on node-1 =
// 0.5" and "refs: all steps ok".

#include <iostream>
#include <string>
#include <vector>

#include <lumen/cli.hpp>
#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>

class Tally {
public:
  explicit Tally(int start)
    : n_(start) {}
  int add(int d) {
    return n_ += d;
  }

private:
  int n_;
};
LUMEN_ACTOR(Tally, &Tally::add);

// [handles-and-refs-code]
// Takes an actor's handle and a list of refs, as Ray tasks can: refs inside
// a list are not resolved for the task; it reads each one itself.
int tally_all(lumen::ActorHandle<Tally> tally,
              std::vector<lumen::ObjectRef<int>> parts) {
  int total = 0;
  for (auto& part : parts)
    total = lumen::get(tally.call(&Tally::add, lumen::get(part)));
  return total;
}
LUMEN_REMOTE(tally_all);

// Leaves a tensor on the node that runs it and returns a ref to it.
lumen::ObjectRef<std::vector<float>> make_here(int n) {
  return lumen::put(std::vector<float>(static_cast<size_t>(n), 0.5f));
}
LUMEN_REMOTE(make_here);

// Reads a tensor wherever it lives: fetched from its owner on `get`.
double mean_of(lumen::ObjectRef<std::vector<float>> xs) {
  auto values = lumen::get(xs);
  double s = 0;
  for (auto x : values)
    s += x;
  return values.empty() ? 0 : s / static_cast<double>(values.size());
}
LUMEN_REMOTE(mean_of);
// [/handles-and-refs-code]

int main(int argc, char** argv) {
  // `refs start ...` makes this program a head or a node.
  if (argc > 1 && std::string{argv[1]} == "start")
    return lumen::cli_main(argc, argv);
  lumen::init(argc, argv);
  if (lumen::this_node_id() == "local") { // no cluster: nowhere to place work
    std::cerr << "refs: run me in a cluster (--address=HOST:PORT, see my "
                 "header) or with node processes of my own (--local-nodes=2)\n";
    lumen::shutdown();
    return 2;
  }

  // [handles-and-refs]
  // An actor that lives in this script, and refs this script owns, handed
  // to a task on a node.
  auto counter = lumen::actor<Tally>(0).remote();
  std::vector<lumen::ObjectRef<int>> parts{lumen::put(1), lumen::put(2),
                                           lumen::put(3)};
  auto tallied = lumen::task(tally_all).on_node("head").remote(counter, parts);
  std::cout << "tally_all = " << lumen::get(tallied) << "\n"; // 6
  // A tensor left on the head, read by a task on another node: it goes
  // from the head to that node, not through this script.
  lumen::ObjectRef<std::vector<float>> made =
    lumen::get(lumen::task(make_here).on_node("head").remote(1 << 20));
  auto avg_elsewhere = lumen::task(mean_of).on_node("node-1").remote(made);
  std::cout << "mean of the head's tensor on node-1 = "
            << lumen::get(avg_elsewhere) << "\n";
  // [/handles-and-refs]

  lumen::shutdown();
  std::cout << "refs: all steps ok\n";
}
