// `lumen stop`: ends the heads and nodes `lumen start` started in the
// background on this machine for this user, and only those.

#include <signal.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "cli/commands.hpp"
#include "cli/run_files.hpp"

namespace lumen::detail {

namespace {

std::string count_of(int n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

} // namespace

int run_stop() {
  int heads = 0;
  int others = 0;
  for (auto& n : running_nodes()) {
    ::kill(n.pid, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (process_alive(n.pid) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (process_alive(n.pid))
      ::kill(n.pid, SIGKILL);
    forget_node(n.pid);
    ++(n.id == "head" ? heads : others);
  }
  if (heads + others == 0) {
    std::cout << "Nothing to stop: no head or node started here runs\n";
  } else {
    std::cout << "Stopped ";
    if (heads > 0)
      std::cout << (heads == 1 ? std::string{"the head"}
                               : count_of(heads, "head"))
                << (others > 0 ? " and " : "");
    if (others > 0)
      std::cout << count_of(others, "node");
    std::cout << "\n";
  }
  return exit_ok;
}

} // namespace lumen::detail
