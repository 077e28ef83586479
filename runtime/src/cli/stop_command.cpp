// `lumen stop`: ends the heads and nodes `lumen start` started in the
// background on this machine for this user, and only those, and returns
// once they have exited.

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "cli/commands.hpp"
#include "cli/run_files.hpp"

namespace lumen::detail {

namespace {

std::string count_of(int n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

std::string seconds_of(std::chrono::steady_clock::duration d) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2)
      << std::chrono::duration<double>(d).count() << " s";
  return out.str();
}

/// Polls `nodes` until each has exited or `until` has passed; returns
/// when each exited, measured from `start` (nothing: still running). A
/// process that is not our child cannot be waited for, only polled.
std::vector<std::optional<std::chrono::steady_clock::duration>>
exits_of(const std::vector<recorded_node>& nodes,
         std::chrono::steady_clock::time_point start,
         std::chrono::steady_clock::time_point until) {
  std::vector<std::optional<std::chrono::steady_clock::duration>> out(
    nodes.size());
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    bool all = true;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!out[i] && !process_alive(nodes[i].pid))
        out[i] = now - start;
      all = all && out[i];
    }
    if (all || now >= until)
      return out;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

} // namespace

int run_stop(const stop_options& o) {
  using clock = std::chrono::steady_clock;
  auto nodes = running_nodes();
  if (nodes.empty()) {
    std::cout << "Nothing to stop: no head or node started here runs\n";
    return exit_ok;
  }
  // All at once, nodes before heads: a node whose head went first would
  // spend its stop trying to rejoin it.
  std::stable_partition(nodes.begin(), nodes.end(),
                        [](const recorded_node& n) { return n.id != "head"; });
  auto start = clock::now();
  for (auto& n : nodes)
    ::kill(n.pid, SIGTERM);
  auto grace = std::chrono::duration_cast<clock::duration>(
    std::chrono::duration<double>(o.grace_seconds));
  auto exits = exits_of(nodes, start, start + grace);
  std::vector<recorded_node> stuck;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!exits[i]) {
      ::kill(nodes[i].pid, SIGKILL);
      stuck.push_back(nodes[i]);
    }
  exits_of(stuck, start, clock::now() + std::chrono::seconds(5));
  int heads = 0;
  int others = 0;
  std::ostringstream report;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto& n = nodes[i];
    report << "  " << std::left << std::setw(8) << n.id << " pid " << n.pid;
    if (exits[i])
      report << ": exited after " << seconds_of(*exits[i]) << "\n";
    else
      report << ": still running " << seconds_of(grace)
             << " after SIGTERM, killed with SIGKILL\n";
    forget_node(n.pid);
    ++(n.id == "head" ? heads : others);
  }
  std::cout << "Stopped ";
  if (heads > 0)
    std::cout << (heads == 1 ? std::string{"the head"}
                             : count_of(heads, "head"))
              << (others > 0 ? " and " : "");
  if (others > 0)
    std::cout << count_of(others, "node");
  std::cout << "\n" << report.str();
  return exit_ok;
}

} // namespace lumen::detail
