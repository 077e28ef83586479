#pragma once

// Shared by the runtime suites: one runtime per test binary, and a gate that
// holds a task or method until the test opens it, so that tests can create
// "not ready yet" states without sleeping.

#include <chrono>
#include <future>
#include <memory>
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
