#define BOOST_TEST_MODULE collective
#include <boost/test/unit_test.hpp>

// Collective groups, every op against closed forms over world sizes and
// lengths, and the bad-input rules, for both backends: built once with
// members that read each other's memory (`threads`), and once, as
// collective_net_test, with members that talk over channels (`processes`;
// here the members are threads of one process on loopback, the
// multi-process tests put them in processes of their own).

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

#include "closed_forms.hpp"

using namespace lumen::collective;
using lumen::ml::dtype;
using lumen::ml::tensor;
using lumen::test::matches;
using lumen::test::rank_input;

#ifdef LUMEN_TEST_PROCESSES
constexpr backend test_backend = backend::processes;
constexpr auto large_algorithm = allreduce_algorithm::ring;

struct lumen_running {
  lumen_running() {
    lumen::init();
  }
  ~lumen_running() {
    lumen::shutdown();
  }
};
BOOST_GLOBAL_FIXTURE(lumen_running);
#else
constexpr backend test_backend = backend::threads;
constexpr auto large_algorithm = allreduce_algorithm::slices;
#endif

namespace {

void join(int world, int rank, const std::string& g) {
  init_group(world, rank, g, test_backend);
}

// Boost.Test's assertions are not thread-safe: the members' threads record
// what went wrong here, and on_ranks reports it from the test's thread.
std::mutex failures_mtx;
std::vector<std::string> failures;

void record_failure(int line, const char* what) {
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

std::atomic<int> next_group{0};

std::string fresh_group() {
  return "g" + std::to_string(next_group++);
}

/// Runs `body(rank)` on `n` threads, each a member of group `g`; returns
/// the message of each rank's collective_error ("" if none).
std::vector<std::string> on_ranks(int n, const std::string& g,
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
        errors[static_cast<size_t>(r)] = e.what();
      }
      if (is_group_initialized(g))
        destroy_group(g);
    });
  for (auto& t : threads)
    t.join();
  std::lock_guard<std::mutex> guard{failures_mtx};
  for (auto& f : failures)
    BOOST_ERROR(f);
  failures.clear();
  return errors;
}

const std::vector<reduce_op> all_ops{reduce_op::sum, reduce_op::product,
                                     reduce_op::min, reduce_op::max,
                                     reduce_op::average};

} // namespace

BOOST_AUTO_TEST_SUITE(collective)

BOOST_AUTO_TEST_CASE(allreduce_matches_the_closed_form_everywhere) {
  for (int n : {1, 2, 3, 4, 7})
    for (size_t length :
         {size_t{0}, size_t{1}, size_t(n - 1), size_t{1000}, size_t{1} << 20})
      for (auto op : all_ops) {
        if (length == (size_t{1} << 20) && op != reduce_op::sum &&
            op != reduce_op::average)
          continue;
        auto g = fresh_group();
        std::vector<int> ok(static_cast<size_t>(n), 0);
        auto errors = on_ranks(n, g, [&](int r) {
          auto t = rank_input(r, length);
          allreduce(t, g, op);
          ok[static_cast<size_t>(r)] = matches(t, op, n);
        });
        for (int r = 0; r < n; ++r) {
          BOOST_TEST(errors[static_cast<size_t>(r)].empty(),
                     errors[static_cast<size_t>(r)]);
          BOOST_TEST(ok[static_cast<size_t>(r)] == 1,
                     "n=" << n << " length=" << length
                          << " op=" << to_string(op) << " rank=" << r);
        }
      }
}

BOOST_AUTO_TEST_CASE(the_algorithms_agree_and_each_can_be_forced) {
  std::vector<allreduce_algorithm> algorithms{large_algorithm,
                                              allreduce_algorithm::direct};
  if (test_backend == backend::processes)
    algorithms.push_back(allreduce_algorithm::naive);
  for (auto algo : algorithms)
    for (size_t length : {size_t{3}, size_t{5000}, size_t{100000}}) {
      auto g = fresh_group();
      auto errors = on_ranks(3, g, [&](int r) {
        set_algorithm(g, algo);
        EXPECT(algorithm_for(g, length * 4) == algo);
        auto t = rank_input(r, length);
        allreduce(t, g, reduce_op::average);
        EXPECT(matches(t, reduce_op::average, 3));
      });
      for (auto& e : errors)
        BOOST_TEST(e.empty(), e);
    }
  auto g = fresh_group();
  join(1, 0, g);
  BOOST_TEST((backend_of(g) == test_backend));
  BOOST_TEST((algorithm_for(g, 4096) == allreduce_algorithm::direct));
  BOOST_TEST((algorithm_for(g, 1 << 20) == large_algorithm));
  // An algorithm of the other backend is refused, naming this one's.
  auto other = test_backend == backend::threads ? allreduce_algorithm::ring
                                                : allreduce_algorithm::slices;
  BOOST_CHECK_EXCEPTION(
    set_algorithm(g, other), collective_error, [](const collective_error& e) {
      return std::string{e.what()}.find("has no algorithm") !=
             std::string::npos;
    });
  destroy_group(g);
}

BOOST_AUTO_TEST_CASE(vectors_and_other_dtypes_reduce_in_place) {
  auto g = fresh_group();
  on_ranks(3, g, [&](int r) {
    std::vector<float> v(10, static_cast<float>(r));
    allreduce(v, g, reduce_op::max);
    EXPECT((v == std::vector<float>(10, 2.0f)));
    tensor i64({5}, dtype::int64);
    for (auto& x : std::vector<int64_t*>{i64.data<int64_t>()})
      std::fill(x, x + 5, int64_t{1} << (40 + r));
    allreduce(i64, g, reduce_op::sum);
    EXPECT(i64.data<int64_t>()[4] ==
           (int64_t{1} << 40) + (int64_t{1} << 41) + (int64_t{1} << 42));
  });
}

BOOST_AUTO_TEST_CASE(reduce_broadcast_allgather_reducescatter_barrier) {
  const int n = 4;
  auto g = fresh_group();
  std::atomic<int> passed_barrier{0};
  auto errors = on_ranks(n, g, [&](int r) {
    auto t = rank_input(r, 1000);
    reduce(t, 2, g, reduce_op::sum);
    if (r == 2)
      EXPECT(matches(t, reduce_op::sum, n));
    else
      EXPECT((t == rank_input(r, 1000))); // untouched
    auto b = rank_input(r, 17);
    broadcast(b, 3, g);
    EXPECT((b == rank_input(3, 17)));
    std::vector<tensor> all;
    allgather(all, rank_input(r, 5), g);
    EXPECT(all.size() == size_t{n});
    for (int q = 0; q < n && all.size() == size_t{n}; ++q)
      EXPECT((all[static_cast<size_t>(q)] == rank_input(q, 5)));
    std::vector<tensor> parts;
    for (int q = 0; q < n; ++q)
      parts.push_back(rank_input(r, 6));
    tensor mine;
    reducescatter(mine, parts, g, reduce_op::max);
    EXPECT(matches(mine, reduce_op::max, n));
    passed_barrier++;
    barrier(g);
    EXPECT(passed_barrier.load() == n); // nobody left before all came
  });
  for (auto& e : errors)
    BOOST_TEST(e.empty(), e);
}

BOOST_AUTO_TEST_CASE(mismatched_lengths_fail_on_every_rank_naming_them) {
  auto g = fresh_group();
  auto errors = on_ranks(3, g, [&](int r) {
    auto t = rank_input(r, r == 1 ? 999 : 1000);
    allreduce(t, g);
  });
  for (auto& e : errors) {
    BOOST_TEST(e.find("group '" + g + "'") != std::string::npos, e);
    BOOST_TEST(e.find("rank 1 passed 999 float32") != std::string::npos, e);
  }
}

BOOST_AUTO_TEST_CASE(mismatched_dtypes_and_roots_fail_on_every_rank) {
  auto g = fresh_group();
  auto errors = on_ranks(2, g, [&](int r) {
    tensor t({8}, r == 0 ? dtype::float32 : dtype::float64);
    allreduce(t, g);
  });
  for (auto& e : errors)
    BOOST_TEST(e.find("same dtype") != std::string::npos, e);
  auto h = fresh_group();
  errors = on_ranks(2, h, [&](int) {
    tensor t({8});
    broadcast(t, 5, h);
  });
  for (auto& e : errors)
    BOOST_TEST(e.find("out of range") != std::string::npos, e);
}

BOOST_AUTO_TEST_CASE(different_collectives_on_different_ranks_fail_cleanly) {
  auto g = fresh_group();
  auto errors = on_ranks(3, g, [&](int r) {
    std::vector<tensor> all;
    if (r == 1)
      barrier(g);
    else
      allgather(all, rank_input(r, 4), g);
  });
  for (auto& e : errors)
    BOOST_TEST(e.find("every rank must call the same collective") !=
                 std::string::npos,
               e);
}

BOOST_AUTO_TEST_CASE(a_member_whose_thread_ends_leaves_its_group) {
  auto g = fresh_group();
  std::atomic<bool> joined{false};
  std::thread leaver{[&] {
    join(2, 1, g);
    while (!joined)
      std::this_thread::yield();
  }};            // ends without destroy
  join(2, 0, g); // this thread stays a member throughout
  joined = true;
  set_timeout(g, std::chrono::milliseconds(5000));
  leaver.join();
  // The others hear at once who left, not after the timeout.
  auto start = std::chrono::steady_clock::now();
  std::string seen;
  try {
    barrier(g);
  } catch (const collective_error& e) {
    seen = e.what();
  }
  BOOST_TEST(seen.find("rank 1 left the group") != std::string::npos, seen);
  BOOST_TEST(
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count() < 2.0);
  if (test_backend == backend::processes) {
    // Its channels are gone: the group is made again (a later test).
    destroy_group(g);
    return;
  }
  // Its rank can be taken again, and the group goes on.
  std::vector<float> mine(5, 1.0f);
  std::atomic<bool> rejoined{false};
  std::string other_error;
  std::thread other{[&] {
    try {
      join(2, 1, g);
      rejoined = true;
      std::vector<float> theirs(5, 2.0f);
      allreduce(theirs, g);
      destroy_group(g);
    } catch (const collective_error& e) {
      other_error = e.what();
    }
  }};
  while (!rejoined)
    std::this_thread::yield();
  allreduce(mine, g);
  other.join();
  BOOST_TEST(other_error.empty(), other_error);
  BOOST_TEST((mine == std::vector<float>(5, 3.0f)));
  destroy_group(g);
}

BOOST_AUTO_TEST_CASE(bad_ranks_and_unknown_groups_are_clear_errors) {
  BOOST_CHECK_EXCEPTION(
    init_group(4, 4, "x"), collective_error, [](const collective_error& e) {
      return std::string{e.what()}.find("ranks 0 to 3") != std::string::npos;
    });
  BOOST_CHECK_EXCEPTION(
    [] {
      tensor t({3});
      allreduce(t, "never-made");
    }(),
    collective_error,
    [](const collective_error& e) {
      return std::string{e.what()}.find("init_group") != std::string::npos;
    });
  auto g = fresh_group();
  // Rank 0 waits for the others: with processes, init_group returns once
  // all came, and here they never all do.
  set_timeout(g, std::chrono::milliseconds(3000));
  std::string first;
  std::atomic<bool> first_in{false};
  std::thread rank0{[&] {
    try {
      join(2, 0, g);
      first_in = true;
      while (first_in)
        std::this_thread::yield(); // stays a member until told
      destroy_group(g);
    } catch (const collective_error& e) {
      first = e.what();
    }
  }};
  if (test_backend == backend::threads)
    while (!first_in)
      std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string second;
  std::thread other{[&] {
    try {
      join(2, 0, g); // the same rank again
    } catch (const collective_error& e) {
      second = e.what();
    }
  }};
  other.join();
  BOOST_TEST(second.find("two members claim it") != std::string::npos, second);
  std::thread sizes{[&] {
    try {
      join(3, 1, g);
    } catch (const collective_error& e) {
      second = e.what();
    }
  }};
  sizes.join();
  BOOST_TEST(second.find("same world_size") != std::string::npos, second);
  first_in = false;
  rank0.join();
  if (test_backend == backend::processes) // it met the member of 3
    BOOST_TEST(first.find("same world_size") != std::string::npos, first);
}

BOOST_AUTO_TEST_CASE(a_member_that_never_comes_fails_the_others_in_time) {
  auto g = fresh_group();
  auto start = std::chrono::steady_clock::now();
  auto errors = on_ranks(3, g, [&](int r) {
    set_timeout(g, std::chrono::milliseconds(300));
    if (r == 2)
      return; // leaves without taking part
    auto t = rank_input(r, 100);
    allreduce(t, g);
  });
  auto took =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
  BOOST_TEST(took < 5.0);
  for (int r = 0; r < 2; ++r)
    BOOST_TEST(errors[static_cast<size_t>(r)].find("rank") != std::string::npos,
               errors[static_cast<size_t>(r)]);
}

BOOST_AUTO_TEST_CASE(async_forms_overlap_other_work_and_keep_their_order) {
  const int n = 3;
  auto g = fresh_group();
  auto errors = on_ranks(n, g, [&](int r) {
    auto a = rank_input(r, 100000);
    auto b = rank_input(r, 10);
    auto first = allreduce_async(a, g, reduce_op::sum);
    auto second = broadcast_async(b, 1, g);
    // Work of this member's own meanwhile, as a backward pass would be.
    double busy = 0;
    for (int i = 0; i < 1000000; ++i)
      busy += i * 0.5;
    EXPECT(busy > 0);
    // A blocking call comes after the queued ones.
    auto c = rank_input(r, 7);
    allreduce(c, g, reduce_op::max);
    EXPECT(first.ready());
    EXPECT(second.ready());
    lumen::get(first);
    lumen::get(second);
    EXPECT(matches(a, reduce_op::sum, n));
    EXPECT((b == rank_input(1, 10)));
    EXPECT(matches(c, reduce_op::max, n));
    // An async failure arrives through the ref, on every rank.
    auto bad = rank_input(r, r == 0 ? 5 : 6);
    EXPECT_THROW(lumen::get(allreduce_async(bad, g)), collective_error);
    std::vector<tensor> all;
    auto gathered = allgather_async(all, rank_input(r, 3), g);
    lumen::get(barrier_async(g));
    lumen::get(gathered);
    EXPECT(all.size() == size_t{n});
  });
  for (auto& e : errors)
    BOOST_TEST(e.empty(), e);
}

BOOST_AUTO_TEST_CASE(send_and_recv_pass_buffers_between_two_ranks) {
  auto g = fresh_group();
  auto errors = on_ranks(3, g, [&](int r) {
    if (r == 0) {
      send(rank_input(0, 100), 2, g);
      std::vector<float> back(4);
      recv(back, 2, g);
      EXPECT((back == std::vector<float>(4, 9.0f)));
    } else if (r == 2) {
      tensor got({100});
      recv(got, 0, g);
      EXPECT((got == rank_input(0, 100)));
      send(std::vector<float>(4, 9.0f), 0, g);
    }
    barrier(g); // rank 1 takes no part in the messages, only here
  });
  for (auto& e : errors)
    BOOST_TEST(e.empty(), e);
  auto h = fresh_group();
  errors = on_ranks(2, h, [&](int r) {
    if (r == 0)
      send(rank_input(0, 10), 1, h);
    else {
      tensor wrong({11});
      recv(wrong, 0, h);
    }
  });
  for (auto& e : errors)
    BOOST_TEST(e.find("both must agree") != std::string::npos, e);
  BOOST_CHECK_EXCEPTION(
    [] {
      join(1, 0, "alone");
      try {
        send(tensor({1}), 0, "alone");
      } catch (...) {
        destroy_group("alone");
        throw;
      }
    }(),
    collective_error,
    [](const collective_error& e) {
      return std::string{e.what()}.find("name another member") !=
             std::string::npos;
    });
}

BOOST_AUTO_TEST_CASE(a_group_is_made_again_under_its_name) {
  auto g = fresh_group();
  for (int round = 0; round < 3; ++round) {
    auto errors = on_ranks(2, g, [&](int r) {
      auto t = rank_input(r, 10);
      allreduce(t, g);
      EXPECT(matches(t, reduce_op::sum, 2));
    });
    for (auto& e : errors)
      BOOST_TEST(e.empty(), e);
  }
}

#ifdef LUMEN_TEST_PROCESSES
BOOST_AUTO_TEST_CASE(each_rank_sends_the_bytes_its_algorithm_promises) {
  for (int n : {2, 3, 4, 7})
    for (size_t length : {size_t{1000}, size_t{1} << 20})
      for (auto algo : {allreduce_algorithm::ring, allreduce_algorithm::direct,
                        allreduce_algorithm::naive}) {
        auto g = fresh_group();
        auto errors = on_ranks(n, g, [&](int r) {
          set_algorithm(g, algo);
          auto before = traffic_of(g);
          auto t = rank_input(r, length);
          allreduce(t, g, reduce_op::sum);
          EXPECT(matches(t, reduce_op::sum, n));
          auto after = traffic_of(g);
          auto sent = after.bytes_sent - before.bytes_sent;
          auto received = after.bytes_received - before.bytes_received;
          size_t bytes = length * 4,
                 left = static_cast<size_t>((r + n - 1) % n);
          auto others = static_cast<size_t>(n - 1) * bytes;
          if (algo == allreduce_algorithm::ring) {
            // 2·S·(N-1)/N, to the byte: the chunks it forwards.
            EXPECT(sent == ring_bytes_per_rank(length, 4,
                                               static_cast<size_t>(n),
                                               static_cast<size_t>(r)));
            EXPECT(received == ring_bytes_per_rank(
                                 length, 4, static_cast<size_t>(n), left));
          } else if (algo == allreduce_algorithm::direct) {
            EXPECT(sent == others);
            EXPECT(received == others);
          } else {
            EXPECT(sent == (r == 0 ? others : bytes));
            EXPECT(received == (r == 0 ? others : bytes));
          }
        });
        for (auto& e : errors)
          BOOST_TEST(e.empty(), e);
      }
}

BOOST_AUTO_TEST_CASE(buffers_far_larger_than_the_sockets_go_round_the_ring) {
  // 64 MiB: each chunk is many times what a socket holds, so a member
  // that waited for its own forwards to leave would wait forever.
  const size_t length = size_t{16} << 20;
  auto g = fresh_group();
  auto errors = on_ranks(3, g, [&](int r) {
    auto t = rank_input(r, length);
    allreduce(t, g, reduce_op::sum);
    EXPECT(matches(t, reduce_op::sum, 3));
    std::vector<tensor> all;
    allgather(all, rank_input(r, length / 4), g);
    EXPECT(all.size() == 3u && all[2] == rank_input(2, length / 4));
  });
  for (auto& e : errors)
    BOOST_TEST(e.empty(), e);
}

BOOST_AUTO_TEST_CASE(a_member_that_never_joins_fails_the_others_naming_it) {
  auto g = fresh_group();
  set_timeout(g, std::chrono::milliseconds(300)); // for the joining
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> errors(2);
  std::vector<std::thread> members;
  for (int r = 0; r < 2; ++r)
    members.emplace_back([&, r] {
      try {
        join(3, r, g); // rank 2 never comes
      } catch (const collective_error& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& m : members)
    m.join();
  BOOST_TEST(
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count() < 5.0);
  for (auto& e : errors) {
    BOOST_TEST(e.find("group '" + g + "'") != std::string::npos, e);
    BOOST_TEST(e.find("rank(s) 2") != std::string::npos, e);
  }
}
#endif

BOOST_AUTO_TEST_SUITE_END()
