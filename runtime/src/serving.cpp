#include "serving.hpp"

#include <signal.h>

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
  shutdown();
}

} // namespace lumen::detail
