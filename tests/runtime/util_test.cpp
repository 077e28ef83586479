#define BOOST_TEST_MODULE util
#include <boost/test/unit_test.hpp>

// lumen::util in one process: actor_pool, queue, huge pages, files (the
// cluster suite util_test runs them across processes).

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <lumen/util/files.hpp>
#include <lumen/util/huge_pages.hpp>

#include "fixture.hpp"
#include "huge_pages_expected.hpp"

using namespace std::chrono;

namespace {

// How many naps run at once now, and the most that ever did.
std::atomic<int> napping{0};
std::atomic<int> most_napping{0};

class Worker {
public:
  // Sleeps `ms`, then returns it; counts its calls.
  int nap(int ms) {
    int now = ++napping;
    for (int seen = most_napping; now > seen;)
      most_napping.compare_exchange_weak(seen, now);
    std::this_thread::sleep_for(milliseconds(ms));
    --napping;
    ++calls_;
    return ms;
  }
  int square(int x) {
    ++calls_;
    return x * x;
  }
  int fail(int x) {
    throw std::runtime_error("no " + std::to_string(x));
  }
  int calls() const {
    return calls_;
  }

private:
  int calls_ = 0;
};

using pool_t = lumen::util::actor_pool<Worker, int>;

std::vector<lumen::ActorHandle<Worker>> workers(int n) {
  std::vector<lumen::ActorHandle<Worker>> out;
  for (int i = 0; i < n; ++i)
    out.push_back(lumen::actor<Worker>().remote());
  return out;
}

auto square = [](const lumen::ActorHandle<Worker>& w, int x) {
  return w.call(&Worker::square, x);
};
auto nap = [](const lumen::ActorHandle<Worker>& w, int ms) {
  return w.call(&Worker::nap, ms);
};

// Puts `n` items 0..n-1, pausing now and then.
int produce(lumen::util::queue<int> q, int n) {
  for (int i = 0; i < n; ++i) {
    q.put(i);
    if (i % 97 == 0)
      std::this_thread::sleep_for(milliseconds(3));
  }
  return n;
}
LUMEN_REMOTE(produce);

} // namespace

LUMEN_ACTOR(Worker, &Worker::nap, &Worker::square, &Worker::fail,
            &Worker::calls);

BOOST_TEST_GLOBAL_FIXTURE(runtime_fixture);

BOOST_AUTO_TEST_SUITE(actor_pool)

BOOST_AUTO_TEST_CASE(map_returns_results_in_input_order_using_every_actor) {
  auto ws = workers(3);
  pool_t pool{ws};
  std::vector<int> xs(30);
  std::iota(xs.begin(), xs.end(), 0);
  auto ys = pool.map(square, xs);
  for (int i = 0; i < 30; ++i)
    BOOST_TEST(ys[static_cast<size_t>(i)] == i * i);
  for (auto& w : ws)
    BOOST_TEST(lumen::get(w.call(&Worker::calls)) > 0);
  BOOST_TEST(!pool.has_next());
}

// A call that ended between the pool's look at what is done and its look
// at what is running once made the pool give up with get_timeout, though
// no timeout was set (pool_and_queue failed so on a loaded machine): many
// short rounds give the race its chances.
BOOST_AUTO_TEST_CASE(a_call_ending_while_the_pool_looks_is_no_timeout) {
  pool_t pool{workers(2)};
  for (int round = 0; round < 300; ++round) {
    auto ys = pool.map(square, std::vector<int>{1, 2, 3, 4});
    BOOST_TEST_REQUIRE((ys == std::vector<int>{1, 4, 9, 16}));
  }
}

BOOST_AUTO_TEST_CASE(unordered_results_come_as_they_finish) {
  pool_t pool{workers(2)};
  auto ys = pool.map_unordered(nap, std::vector<int>{400, 10});
  BOOST_TEST((ys == std::vector<int>{10, 400}));
  pool.submit(nap, 400);
  pool.submit(nap, 10);
  BOOST_TEST(pool.get_next() == 400); // submission order
  BOOST_TEST(pool.get_next() == 10);
}

BOOST_AUTO_TEST_CASE(queued_work_starts_as_soon_as_an_actor_is_free) {
  pool_t pool{workers(2)};
  most_napping = 0;
  for (int i = 0; i < 6; ++i)
    pool.submit(nap, 100);
  BOOST_TEST(!pool.has_free());
  int n = 0;
  while (pool.has_next()) {
    BOOST_TEST(pool.get_next() == 100);
    ++n;
  }
  BOOST_TEST(n == 6);
  BOOST_TEST(most_napping == 2); // both actors at work, never more
  BOOST_TEST(pool.has_free());
}

BOOST_AUTO_TEST_CASE(a_timeout_leaves_the_result_for_later) {
  pool_t pool{workers(1)};
  pool.submit(nap, 300);
  BOOST_CHECK_THROW(pool.get_next(milliseconds(20)), lumen::get_timeout);
  BOOST_TEST(pool.get_next(seconds(10)) == 300);
  BOOST_CHECK_THROW(pool.get_next(), lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(a_failed_call_fails_only_its_result) {
  pool_t pool{workers(2)};
  pool.submit([](auto& w, int x) { return w.call(&Worker::fail, x); }, 1);
  pool.submit(square, 3);
  // A submission that cannot even start fails its own result, too.
  pool.submit(
    [](auto&, int) -> lumen::ObjectRef<int> {
      throw std::invalid_argument("refused");
    },
    0);
  pool.submit(square, 4);
  BOOST_CHECK_THROW(pool.get_next(), lumen::task_error);
  BOOST_TEST(pool.get_next() == 9);
  BOOST_CHECK_THROW(pool.get_next(), std::invalid_argument);
  BOOST_TEST(pool.get_next() == 16);
  BOOST_TEST(!pool.has_next());
}

BOOST_AUTO_TEST_CASE(map_refuses_while_earlier_results_are_unread) {
  pool_t pool{workers(1)};
  pool.submit(square, 2);
  BOOST_CHECK_THROW(pool.map(square, std::vector<int>{1}), lumen::usage_error);
  BOOST_TEST(pool.get_next() == 4);
  BOOST_TEST((pool.map(square, std::vector<int>{1}) == std::vector<int>{1}));
}

BOOST_AUTO_TEST_CASE(actors_can_be_taken_out_and_put_back) {
  pool_t pool{workers(2)};
  auto a = pool.pop_idle();
  auto b = pool.pop_idle();
  BOOST_TEST((a && b));
  BOOST_TEST(!pool.pop_idle());
  pool.submit(square, 4);
  BOOST_CHECK_THROW(pool.get_next(milliseconds(50)), lumen::get_timeout);
  pool.push(*a);
  BOOST_TEST(pool.get_next(seconds(10)) == 16);
  BOOST_CHECK_THROW(pool_t{{}}, lumen::usage_error);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(queue)

BOOST_AUTO_TEST_CASE(items_come_out_in_the_order_they_went_in) {
  lumen::util::queue<std::string> q{0};
  for (auto s : {"a", "b", "c"})
    q.put(s);
  BOOST_TEST(q.size() == 3u);
  BOOST_TEST(q.get() == "a");
  BOOST_TEST(q.get() == "b");
  BOOST_TEST(q.get() == "c");
  BOOST_TEST(q.empty());
}

BOOST_AUTO_TEST_CASE(a_bounded_queue_refuses_or_waits_when_full) {
  lumen::util::queue<int> q{2};
  q.put(1);
  q.put(2);
  BOOST_TEST(q.full());
  BOOST_TEST(!q.try_put(3));
  auto start = steady_clock::now();
  BOOST_CHECK_THROW(q.put(3, milliseconds(100)), lumen::util::queue_full);
  BOOST_TEST(duration<double>(steady_clock::now() - start).count() >= 0.09);
  BOOST_TEST(q.size() == 2u);
  BOOST_TEST(q.get() == 1);
  BOOST_TEST(q.try_put(3));
  BOOST_TEST(q.get() == 2);
  BOOST_TEST(q.get() == 3);
}

BOOST_AUTO_TEST_CASE(an_empty_queue_times_out_or_returns_nothing) {
  lumen::util::queue<int> q{0};
  BOOST_TEST(!q.try_get());
  auto start = steady_clock::now();
  BOOST_CHECK_THROW(q.get(milliseconds(100)), lumen::util::queue_empty);
  BOOST_TEST(duration<double>(steady_clock::now() - start).count() >= 0.09);
}

BOOST_AUTO_TEST_CASE(a_waiting_get_wakes_on_a_put_and_a_waiting_put_on_a_get) {
  // The counts of waiters say when each side waits, so that both waits
  // happen: a get on the empty queue, then a put on the full one.
  lumen::util::queue<int> q{1};
  std::thread later{[q]() mutable {
    eventually([&] { return q.waiting_gets() == 1; });
    q.put(7); // handed to the waiting get
    q.put(8);
    q.put(9); // waits for room until the reader takes 8
  }};
  BOOST_TEST(q.get(seconds(10)) == 7);
  BOOST_TEST(eventually([&] { return q.waiting_puts() == 1; }),
             "the third put did not wait for room");
  BOOST_TEST(q.get(seconds(10)) == 8);
  BOOST_TEST(q.get(seconds(10)) == 9);
  BOOST_TEST(q.waiting_gets() + q.waiting_puts() == 0u);
  later.join();
}

BOOST_AUTO_TEST_CASE(timeouts_lose_no_item) {
  // A task puts 1000 items while this thread takes them with timeouts short
  // enough that many expire: every item arrives once, in order.
  lumen::util::queue<int> q{16};
  auto produced = lumen::task(produce).remote(q, 1000);
  std::vector<int> got;
  int timeouts = 0;
  while (got.size() < 1000) {
    try {
      got.push_back(q.get(microseconds(300)));
    } catch (const lumen::util::queue_empty&) {
      ++timeouts;
    }
  }
  BOOST_TEST(lumen::get(produced, deadline) == 1000);
  for (int i = 0; i < 1000; ++i)
    BOOST_TEST_REQUIRE(got[static_cast<size_t>(i)] == i);
  BOOST_TEST(q.empty());
  BOOST_TEST_MESSAGE(timeouts << " gets timed out");
}

BOOST_AUTO_TEST_SUITE_END()

// The setting passed to processes Lumen starts (lumen/util/huge_pages.hpp):
// its own choice of the tunable stands, others are kept beside it.
BOOST_AUTO_TEST_SUITE(huge_pages)

BOOST_AUTO_TEST_CASE(nodes_get_huge_pages_where_the_system_leaves_them_to_ask) {
  lumen::test::huge_pages_expected expected;
  bool asked = expected.asked;
  ::setenv("GLIBC_TUNABLES", "glibc.malloc.check=0", 1);
  ::unsetenv("LUMEN_HUGE_PAGES");
  BOOST_TEST(lumen::util::huge_pages_environment() ==
               (asked ? "GLIBC_TUNABLES=glibc.malloc.check=0:"
                        "glibc.malloc.hugetlb=1"
                      : ""),
             expected.setting);
  ::unsetenv("GLIBC_TUNABLES");
  BOOST_TEST(lumen::util::huge_pages_environment() ==
             (asked ? "GLIBC_TUNABLES=glibc.malloc.hugetlb=1" : ""));
  ::setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0", 1);
  BOOST_TEST(lumen::util::huge_pages_environment().empty());
  ::unsetenv("GLIBC_TUNABLES");
  ::setenv("LUMEN_HUGE_PAGES", "0", 1);
  BOOST_TEST(lumen::util::huge_pages_environment().empty());
  ::unsetenv("LUMEN_HUGE_PAGES");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(files)

BOOST_AUTO_TEST_CASE(the_rest_of_a_file_comes_whole_from_where_the_stream_is) {
  // Larger than a block, and not a multiple of one, with zero bytes in it.
  std::string text(3'000'001, '\0');
  for (size_t i = 0; i < text.size(); ++i)
    text[i] = static_cast<char>(i * 7919 % 251);
  auto path = "/tmp/lumen-read-rest-" + std::to_string(::getpid());
  std::ofstream{path, std::ios::binary} << text;
  std::ifstream in{path, std::ios::binary};
  BOOST_TEST((lumen::util::read_rest(in) == text));
  std::ifstream again{path, std::ios::binary};
  again.seekg(1000);
  auto rest = lumen::util::read_rest<std::vector<char>>(again);
  BOOST_TEST((rest == std::vector<char>(text.begin() + 1000, text.end())));
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(a_stream_of_no_known_size_and_a_missing_file) {
  // /proc says a size of 0 for what it has: read until the end all the same.
  std::ifstream status{"/proc/self/status"};
  auto all = lumen::util::read_rest(status);
  BOOST_TEST(all.find("Pid:") != std::string::npos);
  BOOST_TEST(all.find("VmRSS:") != std::string::npos);
  std::ifstream none{"/nonexistent/lumen-file"};
  BOOST_TEST(lumen::util::read_rest(none).empty());
}

BOOST_AUTO_TEST_SUITE_END()
