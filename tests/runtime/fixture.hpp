#pragma once

// Shared by the runtime suites: one runtime per test binary, and a gate that
// holds a task or method until the test opens it, so that tests can create
// "not ready yet" states without sleeping.

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <lumen/lumen.hpp>

struct runtime_fixture {
  runtime_fixture() {
    lumen::init();
  }
  ~runtime_fixture() {
    lumen::shutdown();
  }
};

/// A runtime with four task threads that offers `resources` too.
struct offering {
  explicit offering(std::map<std::string, double> resources) {
    lumen::init_options opts;
    opts.num_cpus = 4;
    opts.resources = std::move(resources);
    lumen::init(opts);
  }
  ~offering() {
    lumen::shutdown();
  }
};

/// How many runs are inside at once, and the most that ever were.
struct overlap_meter {
  std::atomic<int> now{0};
  std::atomic<int> most{0};

  void reset() {
    now = 0;
    most = 0;
  }
  /// Enters, stays `ms`, leaves; how many were inside with it.
  int pass(int ms) {
    int in = ++now;
    for (int seen = most.load();
         in > seen && !most.compare_exchange_weak(seen, in);)
      ;
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    --now;
    return in;
  }
};

/// What work in this process holds of resource `name` now.
inline double used_here(const std::string& name) {
  auto here = lumen::nodes().at(0);
  auto i = here.used.find(name);
  return i == here.used.end() ? 0.0 : i->second;
}

/// The usage_error `f` throws; fails the test if it throws none.
template <class F>
lumen::usage_error refusal(F f) {
  try {
    f();
  } catch (const lumen::usage_error& e) {
    return e;
  }
  throw std::logic_error("no usage_error was thrown");
}

/// A one-shot barrier: waiters block until open() is called.
class gate {
public:
  void open() {
    promise_.set_value();
  }
  void wait() const {
    future_.wait();
  }

private:
  std::promise<void> promise_;
  std::shared_future<void> future_ = promise_.get_future().share();
};

/// Long enough for any event we wait on in a healthy run; a deadline, never
/// a sleep.
constexpr auto deadline = std::chrono::seconds(30);

/// Polls `done` every millisecond until the deadline; true once it holds.
template <class F>
bool eventually(F done) {
  auto until = std::chrono::steady_clock::now() + deadline;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}
