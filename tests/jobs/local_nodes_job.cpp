// A script on an embedded cluster of local node processes
// (`--local-nodes N`): reports, one fact a line, that main's output comes
// once, that work on each node runs in a process of its own, that an
// actor lives there, that a node killed with SIGKILL fails its work and
// the rest goes on, and that shutdown ends the node processes.
//   local_nodes_job --local-nodes 2

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <iostream>
#include <vector>

#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>

#include "cluster_job.hpp"

int process_id() {
  return static_cast<int>(::getpid());
}
LUMEN_REMOTE(process_id);

/// One fact, written whole: the head logs to the same output meanwhile.
void say(const std::string& line) {
  std::cout << line + "\n" << std::flush;
}

int main(int argc, char** argv) {
  constexpr auto deadline = std::chrono::seconds(30);
  // The nodes run this too; their output goes nowhere.
  say("main began");
  lumen::init(argc, argv);
  std::vector<std::pair<std::string, int>> nodes;
  for (auto& n : lumen::nodes())
    if (n.alive && n.id != lumen::this_node_id())
      nodes.emplace_back(
        n.id,
        lumen::get(lumen::task(process_id).on_node(n.id).remote(), deadline));
  say("nodes=" + std::to_string(nodes.size()));
  for (auto& [id, pid] : nodes)
    say(id +
        (pid != ::getpid() ? " in a process of its own" : " in this process"));
  auto last = nodes.back().first;
  auto counter = lumen::actor<Counter>(5).on_node(last).remote();
  auto on = lumen::get(counter.call(&Counter::node), deadline);
  auto counted = lumen::get(counter.call(&Counter::add, 1), deadline);
  say("counter on " + on + " counts " + std::to_string(counted));
  auto [victim, victim_pid] = nodes.front();
  auto pending = lumen::task(busy).on_node(victim).remote(60000);
  ::kill(victim_pid, SIGKILL);
  try {
    lumen::get(pending, deadline);
    say(victim + " answered after SIGKILL");
  } catch (const lumen::error& e) {
    say(victim + " killed: its work failed");
  }
  counted = lumen::get(counter.call(&Counter::add, 1), deadline);
  say("counter counts " + std::to_string(counted));
  lumen::shutdown();
  size_t gone = 0;
  for (auto& [id, pid] : nodes)
    gone += ::kill(pid, 0) != 0 && errno == ESRCH;
  say("after shutdown " + std::to_string(gone) + " of " +
      std::to_string(nodes.size()) + " node processes gone");
}
