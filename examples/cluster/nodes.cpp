// Nodes: one program that is both the cluster's nodes and the script that
// uses them, as a Ray program is with `ray start` and `ray.init`.
//
// Teaches: serving as a head or a node from your own program, joining a
// cluster, pinning tasks to a node and spreading them over all nodes, an
// actor placed on some node, and a tensor put here read by a task on
// another node.
//
// Run, in two terminals: the cluster (a head and a node) in the first,
//   ./.build/examples/cluster/nodes start --head --block &
//   ./.build/examples/cluster/nodes start --address 127.0.0.1:6380 --block
// the script in the second:
//   ./.build/examples/cluster/nodes --address=127.0.0.1:6380
// Or alone, with node processes of its own:
//   ./.build/examples/cluster/nodes --local-nodes=2
// The script prints the nodes, where each piece of work ran, and ends with
// "nodes: all steps ok". The head prints the token file; nodes and scripts
// on this machine find it on their own.

#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <lumen/cli.hpp>
#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>

// Registered in this program, so every node started from it can run them.
std::string hostname_of_node() {
  return lumen::this_node_id();
}
LUMEN_REMOTE(hostname_of_node);

double mean(const std::vector<float>& xs) {
  double s = 0;
  for (auto x : xs)
    s += x;
  return xs.empty() ? 0 : s / static_cast<double>(xs.size());
}
LUMEN_REMOTE(mean);

class Tally {
public:
  explicit Tally(int start)
    : n_(start) {}
  int add(int d) {
    return n_ += d;
  }
  std::string node() const {
    return lumen::this_node_id();
  }

private:
  int n_;
};
LUMEN_ACTOR(Tally, &Tally::add, &Tally::node);

int main(int argc, char** argv) {
  // [serve]
  // `nodes start ...` makes this program a head or a node.
  if (argc > 1 && std::string{argv[1]} == "start")
    return lumen::cli_main(argc, argv);
  // [/serve]

  // [join]
  lumen::init(argc, argv); // --address=HOST:PORT joins the cluster there
  for (auto& n : lumen::nodes())
    std::cout << n.id << " at " << n.address << (n.alive ? "" : " (dead)")
              << "\n";
  // [/join]
  if (lumen::this_node_id() == "local") { // no cluster: nowhere to place work
    std::cerr << "nodes: run me in a cluster (--address=HOST:PORT, see my "
                 "header) or with node processes of my own (--local-nodes=2)\n";
    lumen::shutdown();
    return 2;
  }

  // [placement]
  // A task pinned to a node, then 12 spread over all live nodes.
  auto on_head = lumen::task(hostname_of_node).on_node("head").remote();
  std::cout << "pinned task ran on " << lumen::get(on_head) << "\n";
  std::vector<lumen::ObjectRef<std::string>> spread;
  for (int i = 0; i < 12; ++i)
    spread.push_back(lumen::task(hostname_of_node).spread().remote());
  std::set<std::string> places;
  for (auto& p : lumen::get(spread))
    places.insert(p);
  std::cout << "spread tasks ran on " << places.size() << " nodes\n";
  // [/placement]

  // [remote-actor]
  auto tally = lumen::actor<Tally>(0).spread().remote();
  for (int i = 1; i <= 100; ++i)
    tally.call(&Tally::add, i);
  std::cout << "tally on " << lumen::get(tally.call(&Tally::node)) << " = "
            << lumen::get(tally.call(&Tally::add, 0)) << "\n"; // 5050
  // [/remote-actor]

  // [tensor]
  // A 4 MiB tensor put here is read by a task on another node.
  auto tensor = lumen::put(std::vector<float>(1 << 20, 0.25f));
  auto avg = lumen::task(mean).spread().remote(tensor);
  std::cout << "mean = " << lumen::get(avg) << "\n";
  // [/tensor]

  lumen::shutdown();
  std::cout << "nodes: all steps ok\n";
}
