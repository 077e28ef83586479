#include "serving.hpp"

#include <signal.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "lumen/cluster.hpp"
#include "lumen/init.hpp"

#include "log.hpp"

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

void serve_until_stopped() {
  auto set = stop_signals();
  int sig = 0;
  sigwait(&set, &sig);
  log_lifecycle("stopping " + this_node_id());
  // Shutting down waits for the tasks and methods running here, and one
  // that never returns would hold the process forever: a second signal,
  // or the deadline (the one `lumen stop` gives before SIGKILL), ends it
  // without them.
  std::thread{[set] {
    timespec limit{stop_deadline_seconds, 0};
    siginfo_t info{};
    bool again = sigtimedwait(&set, &info, &limit) > 0;
    log_line(again ? "stopped at once: a second stop signal came while work "
                     "was still running"
                   : "stopped at once: work was still running " +
                       std::to_string(stop_deadline_seconds) +
                       " s after the stop signal");
    std::_Exit(1);
  }}.detach();
  shutdown();
}

} // namespace lumen::detail
