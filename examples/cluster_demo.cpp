// Cluster demo: one program that is both the cluster's nodes and the script
// that uses them, as a Ray program is with `ray start` and `ray.init`.
//
// Teaches: joining a cluster, placing tasks and actors on nodes, spreading
// work, handing actor handles and refs to work on other nodes, streaming
// bytes between two processes over a channel, and the cluster's key-value
// store.
//
// Run, in three terminals (or add & to the first two):
//   ./.build/examples/cluster_demo start --head --block
//   ./.build/examples/cluster_demo start --address 127.0.0.1:6380 --block
//   ./.build/examples/cluster_demo --address=127.0.0.1:6380
// The third prints where each piece of work ran and ends with
// "cluster_demo: all steps ok". The first prints the token file; nodes and
// scripts on this machine find it on their own.

#include <chrono>
#include <cstdint>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <lumen/cli.hpp>
#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>

// [remote-code]
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
  return mean(lumen::get(xs));
}
LUMEN_REMOTE(mean_of);
// [/handles-and-refs-code]

// [channel-task]
// Streams the squares 0, 1, 4, ... to whoever connects to "squares".
int64_t stream_squares(int count) {
  auto listener = lumen::listen("squares");
  auto c = listener.accept(std::chrono::seconds(10));
  int64_t sent = 0;
  for (int64_t i = 0; i < count; ++i, ++sent) {
    int64_t square = i * i;
    c.send(&square, sizeof(square));
  }
  return sent;
}
LUMEN_REMOTE(stream_squares);
// [/channel-task]

// [kv-task]
// Reads what the driver left in the cluster's key-value store.
std::string greeting() {
  return lumen::kv::get("demo/greeting").value_or("(nothing)");
}
LUMEN_REMOTE(greeting);
// [/kv-task]
// [/remote-code]

int main(int argc, char** argv) {
  // [serve]
  // `cluster_demo start ...` makes this program a head or a node.
  if (argc > 1 && std::string{argv[1]} == "start")
    return lumen::cli_main(argc, argv);
  // [/serve]

  // [join]
  lumen::init(argc, argv); // --address=HOST:PORT joins the cluster there
  for (auto& n : lumen::nodes())
    std::cout << n.id << " at " << n.address << (n.alive ? "" : " (dead)")
              << "\n";
  // [/join]

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

  // [channel]
  // A task on some node listens; this script connects by name, and the
  // bytes go straight between the two processes.
  auto streamed = lumen::task(stream_squares).spread().remote(1000);
  auto squares = lumen::connect("squares", std::chrono::seconds(10));
  int64_t sum = 0;
  for (int i = 0; i < 1000; ++i) {
    int64_t square = 0;
    squares.recv(&square, sizeof(square));
    sum += square;
  }
  std::cout << "sum of squares over a channel = " << sum << " ("
            << lumen::get(streamed) << " sent)\n"; // 332833500
  // [/channel]

  // [kv]
  // A small declaration for every process of the cluster, kept by the head.
  lumen::kv::put("demo/greeting", "hello from the driver");
  auto heard = lumen::task(greeting).spread().remote();
  std::cout << "a node read: " << lumen::get(heard) << "\n";
  bool mine = lumen::kv::put("demo/leader", "driver", /*overwrite=*/false);
  std::cout << (mine ? "claimed" : "lost") << " demo/leader\n";
  lumen::kv::erase("demo/leader");
  // [/kv]

  lumen::shutdown();
  std::cout << "cluster_demo: all steps ok\n";
}
