#pragma once

// What the collective suites share: the backend they run on (threads, or
// processes when built as collective_net_test), members as threads that
// record failures for the test's thread to report, and fresh group names.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

#include "closed_forms.hpp"

namespace lumen::test {

using namespace lumen::collective;

#ifdef LUMEN_TEST_PROCESSES
constexpr backend test_backend = backend::processes;
constexpr auto large_algorithm = allreduce_algorithm::ring;

#else
constexpr backend test_backend = backend::threads;
constexpr auto large_algorithm = allreduce_algorithm::slices;
#endif

inline void join(int world, int rank, const std::string& g) {
  init_group(world, rank, g, test_backend);
}

// Boost.Test's assertions are not thread-safe: the members' threads record
// what went wrong here, and on_ranks reports it from the test's thread.
inline std::mutex failures_mtx;
inline std::vector<std::string> failures;

inline void record_failure(int line, const char* what) {
  std::lock_guard<std::mutex> guard{failures_mtx};
  failures.push_back("line " + std::to_string(line) + ": " + what);
}

#define EXPECT(...)                                                            \
  do {                                                                         \
    if (!(__VA_ARGS__))                                                        \
      record_failure(__LINE__, #__VA_ARGS__);                                  \
  } while (false)

#define EXPECT_THROW(expr, type)                                               \
  do {                                                                         \
    bool thrown = false;                                                       \
    try {                                                                      \
      expr;                                                                    \
    } catch (const type&) {                                                    \
      thrown = true;                                                           \
    }                                                                          \
    if (!thrown)                                                               \
      record_failure(__LINE__, #expr " did not throw " #type);                 \
  } while (false)

inline std::atomic<int> next_group{0};

inline std::string fresh_group() {
  return "g" + std::to_string(next_group++);
}

/// Reports what the members' threads recorded, on the test's thread.
inline void report_failures() {
  std::lock_guard<std::mutex> guard{failures_mtx};
  for (auto& f : failures)
    BOOST_ERROR(f);
  failures.clear();
}

/// Runs `body(rank)` on `n` threads, each a member of group `g`; returns
/// each rank's collective_error as "[code] message" ("" if none).
inline std::vector<std::string> on_ranks(int n, const std::string& g,
                                         const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        join(n, r, g);
        set_timeout(g, std::chrono::milliseconds(3000));
        body(r);
      } catch (const collective_error& e) {
        errors[static_cast<size_t>(r)] =
          std::string{"["} + lumen::to_string(e.code()) + "] " + e.what();
      }
      if (is_group_initialized(g))
        destroy_group(g);
    });
  for (auto& t : threads)
    t.join();
  report_failures();
  return errors;
}

inline const std::vector<reduce_op> all_ops{reduce_op::sum, reduce_op::product,
                                            reduce_op::min, reduce_op::max,
                                            reduce_op::average};

} // namespace lumen::test
