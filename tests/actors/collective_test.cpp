#define BOOST_TEST_MODULE collective
#include <boost/test/unit_test.hpp>

// Collective groups, every op against closed forms over world sizes and
// lengths, and the bad-input rules, for both backends: built once with
// members that read each other's memory (`threads`), and once, as
// collective_net_test, with members that talk over channels (`processes`;
// here the members are threads of one process on loopback, the
// multi-process tests put them in processes of their own).

#include <chrono>
#include <thread>

#include "members.hpp"

using namespace lumen::collective;
using namespace lumen::test;
using lumen::ml::dtype;
using lumen::ml::tensor;

#ifdef LUMEN_TEST_PROCESSES
struct lumen_running {
  lumen_running() {
    lumen::init();
  }
  ~lumen_running() {
    lumen::shutdown();
  }
};
BOOST_GLOBAL_FIXTURE(lumen_running);
#endif

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

BOOST_AUTO_TEST_CASE(back_to_back_small_allreduces_each_get_their_own_sum) {
  // A member leaves a small all-reduce without waiting for the others and
  // begins its next while a straggler still reads: with messages between
  // two of the ranks in between or not, each sum is its own.
  auto g = fresh_group();
  const int n = 3, times = 300;
  auto errors = on_ranks(n, g, [&](int r) {
    for (int i = 0; i < times; ++i) {
      std::vector<float> v(1000 + static_cast<size_t>(i % 7),
                           static_cast<float>(i * n + r));
      if (r == i % n)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      allreduce(v, g);
      auto want = static_cast<float>(i * n * n + n * (n - 1) / 2);
      EXPECT(v.front() == want && v.back() == want);
      if (i % 10 == 0 && r < 2) {
        std::vector<float> m(3, static_cast<float>(i));
        if (r == 0)
          send(m, 1, g);
        else
          recv(m, 0, g);
      }
    }
  });
  for (auto& e : errors)
    BOOST_TEST(e.empty(), e);
}

BOOST_AUTO_TEST_CASE(
  small_allreduces_between_other_operations_and_late_members) {
  // Members that come together meet without a lock, one late or in
  // another operation sends the round to the ordinary meeting: rounds of
  // each kind in turn, every sum its own, and a disagreement in a quick
  // round named on every rank as in an ordinary one.
  for (int n : {2, 3, 5}) {
    auto g = fresh_group();
    const int times = 2000;
    auto errors = on_ranks(n, g, [&](int r) {
      for (int i = 0; i < times; ++i) {
        std::vector<float> v(1 + static_cast<size_t>(i % 5) * 100,
                             static_cast<float>(i + r));
        if (i % 17 == 0 && r == (i / 17) % n)
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        if (i % 23 == 0)
          barrier(g);
        if (i % 29 == 0) {
          auto big = rank_input(r, 20000);
          allreduce(big, g);
          EXPECT(matches(big, reduce_op::sum, n));
        }
        allreduce(v, g);
        auto want = static_cast<float>(n * i + n * (n - 1) / 2);
        EXPECT(v.front() == want && v.back() == want);
      }
      std::vector<float> odd(r == n - 1 ? 11 : 10, 1.0f);
      EXPECT_THROW(allreduce(odd, g), collective_error);
      std::vector<float> after(10, 1.0f);
      allreduce(after, g);
      EXPECT(after.front() == static_cast<float>(n));
    });
    for (auto& e : errors)
      BOOST_TEST(e.empty(), "n=" << n << ": " << e);
  }
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

BOOST_AUTO_TEST_CASE(an_allreduce_buffer_is_read_where_it_lies_until_all_did) {
  const int n = 3;
  const size_t length = 50000, half = length / 2;
  auto g = fresh_group();
  auto errors = on_ranks(n, g, [&](int r) {
    allreduce_buffer staged{length, g};
#ifdef LUMEN_TEST_PROCESSES
    EXPECT(staged.shared()); // the members share this machine's memory
#else
    EXPECT(!staged.shared());
#endif
    EXPECT(staged.size() == length);
    // Input and output that overlap, not the same: refused, nothing started.
    EXPECT_THROW(allreduce_start(staged.data(), staged.data() + 1, 100, g),
                 collective_error);
    std::vector<float> mean(length);
    for (int step = 0; step < 30; ++step) {
      staged.reuse();
      for (size_t i = 0; i < length; ++i)
        staged.data()[i] = input(r, i) + float(step);
      // In two pieces, as a gradient's buckets.
      auto first = allreduce_start(staged.data(), mean.data(), half, g,
                                   reduce_op::average);
      auto second = allreduce_start(staged.data() + half, mean.data() + half,
                                    length - half, g, reduce_op::average);
      // The last member reads the others' buffers late: had they written
      // the next step's values before it was done, it would sum those.
      if (r == n - 1 && step % 5 == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      first.wait();
      second.wait();
      bool right = true;
      for (size_t i = 0; i < length; ++i) {
        float sum = input(0, i) + float(step);
        for (int q = 1; q < n; ++q)
          sum += input(q, i) + float(step);
        right = right && mean[i] == sum / float(n) &&
                staged.data()[i] == input(r, i) + float(step);
      }
      EXPECT(right);
    }
    // In place from the buffer: its data are what the others read, so
    // they go through a copy.
    staged.reuse();
    for (size_t i = 0; i < length; ++i)
      staged.data()[i] = input(r, i);
    allreduce_start(staged.data(), length, g, reduce_op::max).wait();
    bool right = true;
    for (size_t i = 0; i < length; ++i)
      right = right && staged.data()[i] == expected(reduce_op::max, n, i);
    EXPECT(right);
  });
  for (auto& e : errors)
    BOOST_TEST(e.empty(), e);
}

BOOST_AUTO_TEST_CASE(
  two_allreduce_buffers_in_turn_are_each_read_until_all_did) {
  // A member writes one buffer while a late member still reads the
  // other: reuse waits for the all-reduces that read the buffer itself.
  const int n = 3;
  const size_t length = 30000;
  auto g = fresh_group();
  auto errors = on_ranks(n, g, [&](int r) {
    allreduce_buffer staged[2] = {{length, g}, {length, g}};
#ifdef LUMEN_TEST_PROCESSES
    EXPECT(staged[0].shared() && staged[1].shared());
#endif
    std::vector<float> mean[2] = {std::vector<float>(length),
                                  std::vector<float>(length)};
    started_allreduce running[2];
    bool right = true;
    auto check = [&](int step) {
      auto& m = mean[step % 2];
      for (size_t i = 0; i < length; i += 7) {
        float sum = 0;
        for (int q = 0; q < n; ++q)
          sum += input(q, i) + float(step);
        right = right && m[i] == sum / float(n);
      }
    };
    for (int step = 0; step < 40; ++step) {
      auto& mine = staged[step % 2];
      mine.reuse();
      for (size_t i = 0; i < length; ++i)
        mine.data()[i] = input(r, i) + float(step);
      running[step % 2] = allreduce_start(mine.data(), mean[step % 2].data(),
                                          length, g, reduce_op::average);
      // The last step's all-reduce is waited for only now, and the last
      // member is late every fifth step: the others write this step's
      // buffer while it may still read theirs of the step before.
      if (r == n - 1 && step % 5 == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (step > 0) {
        running[(step - 1) % 2].wait();
        check(step - 1);
      }
    }
    running[1].wait();
    check(39);
    EXPECT(right);
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

BOOST_AUTO_TEST_SUITE_END()
