#define BOOST_TEST_MODULE task
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fixture.hpp"

namespace {

int square(int x) {
  return x * x;
}
LUMEN_REMOTE(square);

int add(int x, int y) {
  return x + y;
}
LUMEN_REMOTE(add);

std::string greet(const std::string& who) {
  return "hello " + who;
}
LUMEN_REMOTE(greet);

double sum(const std::vector<double>& xs) {
  double s = 0;
  for (auto x : xs)
    s += x;
  return s;
}
LUMEN_REMOTE(sum);

int fails(int x) {
  throw std::invalid_argument("bad input " + std::to_string(x));
}
LUMEN_REMOTE(fails);

int throws_int() {
  throw 42;
}
LUMEN_REMOTE(throws_int);

std::atomic<int> attempts{0};

int flaky(int failures) {
  if (attempts.fetch_add(1) < failures)
    throw std::runtime_error("transient");
  return attempts.load();
}
LUMEN_REMOTE(flaky);

int not_registered(int x) {
  return x;
}

// Each level waits on the next one's task from inside a task: with a fixed
// pool of one thread this would deadlock.
int nested(int depth) {
  if (depth == 0)
    return 0;
  return 1 + lumen::get(lumen::task(nested).remote(depth - 1));
}
LUMEN_REMOTE(nested);

int exits() {
  lumen::exit_actor();
}
LUMEN_REMOTE(exits);

// Waits for a subtask with lumen::wait instead of get.
int waits_for_child() {
  std::vector<lumen::ObjectRef<int>> child{lumen::task(square).remote(3)};
  return static_cast<int>(lumen::wait(child, 1, deadline).ready.size());
}
LUMEN_REMOTE(waits_for_child);

size_t thread_count() {
  std::ifstream status{"/proc/self/status"};
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0)
      return std::stoul(line.substr(8));
  return 0;
}

} // namespace

struct one_cpu_runtime {
  one_cpu_runtime() {
    lumen::init_options opts;
    opts.num_cpus = 1;
    lumen::init(opts);
  }
  ~one_cpu_runtime() {
    lumen::shutdown();
  }
};

BOOST_TEST_GLOBAL_FIXTURE(one_cpu_runtime);

BOOST_AUTO_TEST_SUITE(task)

BOOST_AUTO_TEST_CASE(remote_returns_a_ref_to_the_result) {
  BOOST_TEST(lumen::get(lumen::task(square).remote(4)) == 16);
  BOOST_TEST(lumen::get(lumen::task(add).remote(2, 3)) == 5);
  BOOST_TEST(lumen::get(lumen::task(greet).remote("ray")) == "hello ray");
  BOOST_TEST(
    lumen::get(lumen::task(sum).remote(std::vector<double>{1, 2, 3})) == 6.0);
}

BOOST_AUTO_TEST_CASE(ref_arguments_are_resolved_before_the_call) {
  auto a = lumen::task(square).remote(3);
  auto b = lumen::task(add).remote(a, 1); // 10
  auto c = lumen::task(add).remote(a, b); // 19
  auto d = lumen::task(square).remote(c); // 361
  BOOST_TEST(lumen::get(d) == 361);
  auto v = lumen::put(std::vector<double>{0.5, 0.25});
  BOOST_TEST(lumen::get(lumen::task(sum).remote(v)) == 0.75);
}

BOOST_AUTO_TEST_CASE(a_long_dependency_chain_resolves) {
  auto r = lumen::task(add).remote(0, 1);
  for (int i = 0; i < 1000; ++i)
    r = lumen::task(add).remote(r, 1);
  BOOST_TEST(lumen::get(r) == 1001);
}

BOOST_AUTO_TEST_CASE(get_rethrows_the_remote_exception_with_type_and_message) {
  auto r = lumen::task(fails).remote(7);
  try {
    lumen::get(r);
    BOOST_FAIL("get did not throw");
  } catch (const lumen::task_error& e) {
    BOOST_TEST(e.function() == "fails");
    BOOST_TEST(e.exception_type() == "std::invalid_argument");
    BOOST_TEST(e.message() == "bad input 7");
    BOOST_TEST(e.node() == "local");
    std::string what = e.what();
    BOOST_TEST(what.find("fails") != std::string::npos);
    BOOST_TEST(what.find("std::invalid_argument") != std::string::npos);
    BOOST_TEST(what.find("bad input 7") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(exceptions_not_derived_from_std_exception_are_reported) {
  try {
    lumen::get(lumen::task(throws_int).remote());
    BOOST_FAIL("get did not throw");
  } catch (const lumen::task_error& e) {
    BOOST_TEST(e.exception_type() == "int");
  }
}

BOOST_AUTO_TEST_CASE(a_failed_argument_fails_the_dependent_task) {
  auto bad = lumen::task(fails).remote(1);
  auto dependent = lumen::task(square).remote(bad);
  BOOST_CHECK_EXCEPTION(
    lumen::get(dependent), lumen::task_error,
    [](const lumen::task_error& e) { return e.function() == "fails"; });
}

BOOST_AUTO_TEST_CASE(exceptions_are_retried_only_when_asked) {
  attempts = 0;
  auto once = lumen::task(flaky).with_max_retries(3).remote(2);
  BOOST_CHECK_THROW(lumen::get(once), lumen::task_error);
  BOOST_TEST(attempts.load() == 1);

  attempts = 0;
  auto retried =
    lumen::task(flaky).with_max_retries(3).with_retry_exceptions(true).remote(
      2);
  BOOST_TEST(lumen::get(retried) == 3);

  attempts = 0;
  auto exhausted =
    lumen::task(flaky).with_max_retries(1).with_retry_exceptions(true).remote(
      5);
  BOOST_CHECK_THROW(lumen::get(exhausted), lumen::task_error);
  BOOST_TEST(attempts.load() == 2);
}

BOOST_AUTO_TEST_CASE(negative_retry_counts_are_rejected) {
  BOOST_CHECK_THROW(lumen::task(square).with_max_retries(-1),
                    lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(an_unregistered_function_is_a_usage_error) {
  BOOST_CHECK_EXCEPTION(lumen::task(not_registered), lumen::usage_error,
                        [](const lumen::usage_error& e) {
                          return std::string{e.what()}.find("LUMEN_REMOTE") !=
                                 std::string::npos;
                        });
}

BOOST_AUTO_TEST_CASE(tasks_blocking_in_get_do_not_starve_the_pool) {
  BOOST_TEST(lumen::get(lumen::task(nested).remote(8), deadline) == 8);
}

BOOST_AUTO_TEST_CASE(tasks_blocking_in_wait_do_not_starve_the_pool) {
  BOOST_TEST(lumen::get(lumen::task(waits_for_child).remote(), deadline) == 1);
}

BOOST_AUTO_TEST_CASE(stand_in_workers_do_not_pile_up) {
  // Each nested(1) blocks its worker once, which starts a stand-in thread
  // that retires afterwards; retired threads must be reclaimed.
  auto before = thread_count();
  for (int i = 0; i < 3000; ++i)
    BOOST_TEST_REQUIRE(lumen::get(lumen::task(nested).remote(1), deadline) ==
                       1);
  BOOST_TEST(thread_count() < before + 16);
}

BOOST_AUTO_TEST_CASE(exit_actor_outside_an_actor_fails_the_task) {
  BOOST_CHECK_EXCEPTION(lumen::get(lumen::task(exits).remote()),
                        lumen::task_error, [](const lumen::task_error& e) {
                          return e.exception_type() == "lumen::usage_error";
                        });
}

BOOST_AUTO_TEST_CASE(many_tasks_complete) {
  std::vector<lumen::ObjectRef<int>> refs;
  for (int i = 0; i < 20000; ++i)
    refs.push_back(lumen::task(square).remote(i % 100));
  auto values = lumen::get(refs, deadline);
  for (int i = 0; i < 20000; ++i)
    BOOST_TEST_REQUIRE(values[i] == (i % 100) * (i % 100));
}

BOOST_AUTO_TEST_SUITE_END()
