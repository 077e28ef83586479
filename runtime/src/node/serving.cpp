#include "node/serving.hpp"

#include <signal.h>

#include <cstdlib>
#include <thread>

#include "lumen/cluster.hpp"
#include "lumen/init.hpp"

#include "core/log.hpp"

namespace lumen::detail {

namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

} // namespace

void mask_stop_signals() {
  auto set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void serve_until_stopped(const std::function<std::string()>& abandoned) {
  auto set = stop_signals();
  int sig = 0;
  sigwait(&set, &sig);
  if (abandoned)
    if (auto why = abandoned(); !why.empty()) {
      log_line("stopped at once: " + why);
      std::_Exit(1);
    }
  log_lifecycle("stopping " + this_node_id());
  // Shutting down waits for the tasks and methods running here, and one
  // that never returns would hold the process forever: a second signal
  // ends it without them (`lumen stop` sends SIGKILL after 10 s).
  std::thread{[set] {
    int again = 0;
    sigwait(&set, &again);
    log_line("stopped at once: a second stop signal came before the work "
             "running here finished");
    std::_Exit(1);
  }}.detach();
  shutdown();
}

} // namespace lumen::detail
