#define BOOST_TEST_MODULE cancel
#include <boost/test/unit_test.hpp>

// lumen::cancel in one process: queued work never starts, running work sees
// lumen::cancelled(), refs fail with task_cancelled, and what cannot be
// cancelled says so. tests/cluster/cancel_procs_test.cpp does it across
// processes.

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "fixture.hpp"

using namespace std::chrono;

namespace {

// One task thread: a task holding it keeps the next one queued.
struct one_cpu {
  one_cpu() {
    lumen::init_options opts;
    opts.num_cpus = 1;
    lumen::init(opts);
  }
  ~one_cpu() {
    lumen::shutdown();
  }
};

gate* held = nullptr; // what hold() waits for
std::atomic<int> started{0};
std::atomic<bool> saw_cancel{false};

int hold(int x) {
  ++started;
  held->wait();
  return x;
}
LUMEN_REMOTE(hold);

int count_start(int x) {
  ++started;
  return x;
}
LUMEN_REMOTE(count_start);

// Works until it is cancelled, as a long training step would.
int until_cancelled() {
  ++started;
  while (!lumen::cancelled())
    std::this_thread::sleep_for(milliseconds(1));
  saw_cancel = true;
  return 1;
}
LUMEN_REMOTE(until_cancelled);

int plus_one(int x) {
  return x + 1;
}
LUMEN_REMOTE(plus_one);

bool cancelled_here() {
  return lumen::cancelled();
}
LUMEN_REMOTE(cancelled_here);

class Worker {
public:
  int hold(int x) {
    ++calls_;
    held->wait();
    return x;
  }
  int until_cancelled() {
    ++calls_;
    ++started;
    while (!lumen::cancelled())
      std::this_thread::sleep_for(milliseconds(1));
    saw_cancel = true;
    return 1;
  }
  int calls() const {
    return calls_;
  }

private:
  int calls_ = 0;
};
LUMEN_ACTOR(Worker, &Worker::hold, &Worker::until_cancelled, &Worker::calls);

template <class T>
bool fails_cancelled(const lumen::ObjectRef<T>& ref) {
  try {
    lumen::get(ref, deadline);
  } catch (const lumen::task_cancelled& e) {
    return e.code() == lumen::errc::task_cancelled &&
           std::string{e.what()}.find("cancelled by lumen::cancel") !=
             std::string::npos;
  }
  return false;
}

// With the only task thread held, a task queued behind is cancelled: its
// ref fails at once and, once the thread is free, it never runs.
void queued_task_is_skipped(bool force) {
  gate g;
  held = &g;
  auto busy = lumen::task(hold).remote(1);
  BOOST_REQUIRE(eventually([] { return started == 1; }));
  auto queued = lumen::task(count_start).remote(2);
  lumen::cancel(queued, force);
  BOOST_TEST(fails_cancelled(queued)); // before the thread is free
  g.open();
  BOOST_TEST(lumen::get(busy, deadline) == 1);
  // A task after it runs, the cancelled one did not.
  BOOST_TEST(lumen::get(lumen::task(plus_one).remote(1), deadline) == 2);
  BOOST_TEST(started == 1);
}

struct reset {
  reset() {
    started = 0;
    saw_cancel = false;
  }
};

} // namespace

BOOST_GLOBAL_FIXTURE(one_cpu);
BOOST_FIXTURE_TEST_SUITE(cancel, reset)

BOOST_AUTO_TEST_CASE(a_queued_task_never_runs_and_its_ref_fails_at_once) {
  queued_task_is_skipped(false);
}

BOOST_AUTO_TEST_CASE(a_running_task_sees_cancelled_and_its_result_is_dropped) {
  auto ref = lumen::task(until_cancelled).remote();
  BOOST_REQUIRE(eventually([] { return started == 1; }));
  BOOST_TEST(!saw_cancel);
  lumen::cancel(ref);
  BOOST_TEST(fails_cancelled(ref));
  BOOST_TEST(eventually([] { return saw_cancel.load(); }));
}

BOOST_AUTO_TEST_CASE(cancelled_is_false_outside_cancelled_work) {
  BOOST_TEST(!lumen::cancelled());
  BOOST_TEST(!lumen::get(lumen::task(cancelled_here).remote(), deadline));
}

BOOST_AUTO_TEST_CASE(work_depending_on_a_cancelled_ref_fails_with_it) {
  gate g;
  held = &g;
  auto busy = lumen::task(hold).remote(1);
  BOOST_REQUIRE(eventually([] { return started == 1; }));
  auto first = lumen::task(plus_one).remote(1);
  auto second = lumen::task(plus_one).remote(first);
  lumen::cancel(first);
  g.open();
  BOOST_TEST(fails_cancelled(second));
  BOOST_TEST(lumen::get(busy, deadline) == 1);
}

BOOST_AUTO_TEST_CASE(a_finished_task_is_left_as_it_is) {
  auto ref = lumen::task(plus_one).remote(41);
  BOOST_TEST(lumen::get(ref, deadline) == 42);
  lumen::cancel(ref);
  lumen::cancel(ref, true);
  BOOST_TEST(lumen::get(ref, deadline) == 42);
}

BOOST_AUTO_TEST_CASE(cancelling_twice_is_harmless) {
  auto ref = lumen::task(until_cancelled).remote();
  BOOST_REQUIRE(eventually([] { return started == 1; }));
  lumen::cancel(ref);
  lumen::cancel(ref);
  BOOST_TEST(fails_cancelled(ref));
  BOOST_TEST(eventually([] { return saw_cancel.load(); }));
}

BOOST_AUTO_TEST_CASE(force_on_a_task_running_here_is_refused) {
  auto ref = lumen::task(until_cancelled).remote();
  BOOST_REQUIRE(eventually([] { return started == 1; }));
  BOOST_CHECK_EXCEPTION(lumen::cancel(ref, true), lumen::usage_error,
                        [](const lumen::usage_error& e) {
                          return std::string{e.what()}.find("without force") !=
                                 std::string::npos;
                        });
  BOOST_TEST(!ref.state()->ready()); // refused: nothing was cancelled
  lumen::cancel(ref);
  BOOST_TEST(fails_cancelled(ref));
  BOOST_TEST(eventually([] { return saw_cancel.load(); }));
}

BOOST_AUTO_TEST_CASE(force_on_a_queued_task_cancels_it) {
  queued_task_is_skipped(true);
}

BOOST_AUTO_TEST_CASE(a_queued_actor_call_is_skipped_and_later_calls_run) {
  gate g;
  held = &g;
  auto w = lumen::actor<Worker>().remote();
  auto busy = w.call(&Worker::hold, 1);
  auto queued = w.call(&Worker::hold, 2);
  lumen::cancel(queued);
  BOOST_TEST(fails_cancelled(queued));
  g.open();
  BOOST_TEST(lumen::get(busy, deadline) == 1);
  BOOST_TEST(lumen::get(w.call(&Worker::calls), deadline) == 1);
}

BOOST_AUTO_TEST_CASE(a_running_actor_call_sees_cancelled) {
  auto w = lumen::actor<Worker>().remote();
  auto ref = w.call(&Worker::until_cancelled);
  BOOST_REQUIRE(eventually([] { return started == 1; }));
  BOOST_TEST(!saw_cancel);
  lumen::cancel(ref);
  BOOST_TEST(fails_cancelled(ref));
  BOOST_TEST(eventually([] { return saw_cancel.load(); }));
  BOOST_TEST(lumen::get(w.call(&Worker::calls), deadline) == 1);
}

BOOST_AUTO_TEST_CASE(force_on_an_actor_call_is_refused) {
  gate g;
  held = &g;
  auto w = lumen::actor<Worker>().remote();
  auto ref = w.call(&Worker::hold, 1);
  BOOST_CHECK_EXCEPTION(lumen::cancel(ref, true), lumen::usage_error,
                        [](const lumen::usage_error& e) {
                          return std::string{e.what()}.find("lumen::kill") !=
                                 std::string::npos;
                        });
  g.open();
  BOOST_TEST(lumen::get(ref, deadline) == 1);
}

BOOST_AUTO_TEST_CASE(refs_that_no_task_makes_cannot_be_cancelled) {
  lumen::cancel(lumen::put(1)); // ready: nothing to do
  lumen::promise<int> p;
  BOOST_CHECK_EXCEPTION(lumen::cancel(p.ref()), lumen::usage_error,
                        [](const lumen::usage_error& e) {
                          return std::string{e.what()}.find(
                                   "nothing to cancel") != std::string::npos;
                        });
  BOOST_CHECK_THROW(lumen::cancel(lumen::ObjectRef<int>{}), lumen::usage_error);
  p.set_value(1);
}

// A ref finds its work through a pointer the work clears as it is freed:
// cancels racing work that finishes and goes must never touch freed work
// (the sanitizer build checks) and leave each ref with its value or
// task_cancelled. The tasks wait behind a held thread; the cancels start
// at the back, the thread is let go at the front, and they meet.
BOOST_AUTO_TEST_CASE(cancels_racing_finishing_work_leave_a_value_or_a_cancel) {
  gate g;
  held = &g;
  auto busy = lumen::task(hold).remote(0);
  BOOST_REQUIRE(eventually([] { return started == 1; }));
  constexpr int n = 20000;
  std::vector<lumen::ObjectRef<int>> refs;
  refs.reserve(n);
  for (int i = 0; i < n; ++i)
    refs.push_back(lumen::task(plus_one).remote(i));
  std::atomic<bool> under_way{false};
  std::thread canceller{[&] {
    for (int i = n - 1; i >= 0; --i) {
      lumen::cancel(refs[static_cast<size_t>(i)]);
      under_way = true;
    }
  }};
  BOOST_REQUIRE(eventually([&] { return under_way.load(); }));
  g.open();
  canceller.join();
  int values = 0;
  int cancelled = 0;
  for (int i = 0; i < n; ++i) {
    try {
      BOOST_TEST(lumen::get(refs[static_cast<size_t>(i)], deadline) == i + 1);
      ++values;
    } catch (const lumen::task_cancelled&) {
      ++cancelled;
    }
  }
  BOOST_TEST(values + cancelled == n);
  BOOST_TEST(cancelled > 0); // the last one was cancelled while held
  BOOST_TEST(lumen::get(busy, deadline) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
