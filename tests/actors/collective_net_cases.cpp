#include <boost/test/unit_test.hpp>

// The cases only a group across processes has: the bytes each algorithm
// puts on the wire, buffers far larger than a socket holds, and a member
// that never joins (collective_net_test, beside collective_test.cpp's).

#include "members.hpp"

using namespace lumen::collective;
using namespace lumen::test;
using lumen::ml::tensor;

BOOST_AUTO_TEST_SUITE(collective_net)

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

namespace {

/// Every reduction with `algo` forced, over `worlds` × `lengths`, against
/// the closed forms; `bytes(n, length)` is what each rank must send and
/// receive, where it is 0 or more (-1: not asserted).
template <class Bytes>
void sweep(allreduce_algorithm algo, std::initializer_list<int> worlds,
           std::initializer_list<size_t> lengths, Bytes bytes) {
  for (int n : worlds)
    for (size_t length : lengths)
      for (auto op : {reduce_op::sum, reduce_op::product, reduce_op::min,
                      reduce_op::max, reduce_op::average}) {
        auto g = fresh_group();
        long want = bytes(n, length);
        auto errors = on_ranks(n, g, [&](int r) {
          set_algorithm(g, algo);
          auto before = traffic_of(g);
          auto t = rank_input(r, length);
          allreduce(t, g, op);
          EXPECT(matches(t, op, n));
          auto after = traffic_of(g);
          if (want >= 0) {
            EXPECT(after.bytes_sent - before.bytes_sent ==
                   static_cast<uint64_t>(want));
            EXPECT(after.bytes_received - before.bytes_received ==
                   static_cast<uint64_t>(want));
          }
        });
        for (auto& e : errors)
          BOOST_TEST(e.empty(), to_string(algo)
                                  << " n=" << n << " length=" << length
                                  << " op=" << to_string(op) << ": " << e);
      }
}

} // namespace

BOOST_AUTO_TEST_CASE(halving_doubling_matches_the_closed_forms_and_the_bytes) {
  // Lengths that split evenly into N blocks send exactly the ring's
  // 2·S·(N-1)/N each way; the others (and N = 1) must still be right.
  sweep(allreduce_algorithm::halving_doubling, {1, 2, 4, 8},
        {0, 1, 7, 1000, size_t{1} << 18}, [](int n, size_t length) {
          auto ranks = static_cast<size_t>(n);
          return length % ranks != 0
                   ? -1L
                   : static_cast<long>(2 * length * 4 * (ranks - 1) / ranks);
        });
}

BOOST_AUTO_TEST_CASE(recursive_doubling_matches_the_closed_forms_and_bytes) {
  // S·log2 N bytes each way: the whole partial result, once a round.
  sweep(allreduce_algorithm::recursive_doubling, {4, 8}, {0, 1, 7, 1000},
        [](int n, size_t length) {
          return static_cast<long>((n == 4 ? 2 : 3) * length * 4);
        });
}

BOOST_AUTO_TEST_CASE(a_rank_refusing_its_input_fails_all_by_doubling) {
  // Rank 2 alone names a root out of range: it says why, the others
  // name it, and the group goes on.
  auto g = fresh_group();
  auto errors = on_ranks(4, g, [&](int r) {
    auto t = rank_input(r, 16);
    try {
      broadcast(t, r == 2 ? 9 : 0, g);
      EXPECT(false);
    } catch (const collective_error& e) {
      std::string what = e.what();
      EXPECT(what.find(r == 2 ? "out of range" : "rank 2 named rank 9") !=
             std::string::npos);
    }
    barrier(g);
  });
  for (auto& e : errors)
    BOOST_TEST(e.empty(), e);
}

BOOST_AUTO_TEST_CASE(automatic_picks_pairwise_algorithms_in_groups_of_four) {
  auto g = fresh_group();
  auto errors = on_ranks(4, g, [&](int r) {
    EXPECT(algorithm_for(g, 16 << 10) ==
           allreduce_algorithm::recursive_doubling);
    EXPECT(algorithm_for(g, 256 << 10) ==
           allreduce_algorithm::halving_doubling);
    EXPECT(algorithm_for(g, 4 << 20) == allreduce_algorithm::ring);
    auto t = rank_input(r, 64 << 10);
    allreduce(t, g, reduce_op::average);
    EXPECT(matches(t, reduce_op::average, 4));
  });
  for (auto& e : errors)
    BOOST_TEST(e.empty(), e);
}

BOOST_AUTO_TEST_CASE(halving_doubling_in_a_group_of_three_fails_every_rank) {
  auto g = fresh_group();
  auto errors = on_ranks(3, g, [&](int r) {
    set_algorithm(g, allreduce_algorithm::halving_doubling);
    auto t = rank_input(r, 1000);
    try {
      allreduce(t, g);
      EXPECT(false);
    } catch (const collective_error& e) {
      EXPECT(std::string{e.what()}.find("power-of-two") != std::string::npos);
    }
    // The group goes on with an algorithm it has.
    set_algorithm(g, allreduce_algorithm::ring);
    allreduce(t, g);
    EXPECT(matches(t, reduce_op::sum, 3));
  });
  for (auto& e : errors)
    BOOST_TEST(e.empty(), e);
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

BOOST_AUTO_TEST_CASE(a_group_made_again_at_once_meets_its_new_members) {
  // Each member goes on to the next incarnation as soon as it is done with
  // the last: a fast one connects while a slow one's old listener is still
  // up (and then closes), and must try again, not fail.
  auto g = fresh_group();
  set_timeout(g, std::chrono::milliseconds(5000)); // for every joining
  const int n = 3, rounds = 8;
  std::vector<std::string> errors(n);
  std::vector<std::thread> members;
  for (int r = 0; r < n; ++r)
    members.emplace_back([&, r] {
      try {
        for (int round = 0; round < rounds; ++round) {
          join(n, r, g);
          auto u = rank_input(r, 10);
          allreduce(u, g);
          EXPECT(matches(u, reduce_op::sum, n));
          if (r == 0) // the slow one
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          destroy_group(g);
        }
      } catch (const collective_error& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& m : members)
    m.join();
  report_failures();
  for (auto& e : errors)
    BOOST_TEST(e.empty(), e);
}

BOOST_AUTO_TEST_SUITE_END()
