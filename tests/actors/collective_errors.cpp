#include <boost/test/unit_test.hpp>

// The bad-input and failure rules, for both backends (in collective_test
// and collective_net_test alike): disagreeing ranks, bad ranks, unknown
// groups, members that leave or never come.

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include <lumen/util/spin.hpp>

#include "members.hpp"

using namespace lumen::collective;
using namespace lumen::test;
using lumen::ml::dtype;
using lumen::ml::tensor;

namespace {

/// How an error names rank `rank`'s call on line `line` of this file, its
/// `seq`th operation in the group.
std::string called_here(int rank, int line, int seq) {
  return "rank " + std::to_string(rank) +
         " called at collective_errors.cpp:" + std::to_string(line) +
         " as operation " + std::to_string(seq);
}

} // namespace

BOOST_AUTO_TEST_SUITE(collective_errors)

// Three members agree all to all, four and eight by recursive doubling
// (across processes): every rank must hear of the pair either way, and
// the group go on.
BOOST_AUTO_TEST_CASE(mismatched_lengths_fail_on_every_rank_naming_them) {
  for (int n : {3, 4, 8})
    for (size_t length : {size_t{1000}, size_t{100000}}) {
      auto g = fresh_group();
      constexpr int line = __LINE__ + 3;
      auto errors = on_ranks(n, g, [&](int r) {
        auto t = rank_input(r, r == 1 ? length - 1 : length);
        allreduce(t, g);
      });
      for (auto& e : errors) {
        BOOST_TEST(e.rfind("[mismatch] ", 0) == 0, e);
        BOOST_TEST(e.find("group '" + g + "'") != std::string::npos, e);
        BOOST_TEST(e.find("rank 1 passed " + std::to_string(length - 1) +
                          " float32") != std::string::npos,
                   e);
        // Where each of the two called it, and which of their operations
        // (the other one: the member that heard of rank 1 first).
        BOOST_TEST(e.find(called_here(1, line, 1)) != std::string::npos, e);
        auto site = " called at collective_errors.cpp:" + std::to_string(line) +
                    " as operation 1";
        auto first = e.find(site);
        BOOST_TEST((first != std::string::npos &&
                    e.find(site, first + 1) != std::string::npos),
                   e);
      }
      errors = on_ranks(n, g, [&](int r) {
        auto t = rank_input(r, 10);
        allreduce(t, g);
        EXPECT(matches(t, reduce_op::sum, n));
      });
      for (auto& e : errors)
        BOOST_TEST(e.empty(), e);
    }
}

BOOST_AUTO_TEST_CASE(mismatched_dtypes_and_roots_fail_on_every_rank) {
  auto g = fresh_group();
  auto errors = on_ranks(2, g, [&](int r) {
    tensor t({8}, r == 0 ? dtype::float32 : dtype::float64);
    allreduce(t, g);
  });
  for (auto& e : errors) {
    BOOST_TEST(e.rfind("[mismatch] ", 0) == 0, e);
    BOOST_TEST(e.find("same dtype") != std::string::npos, e);
  }
  auto h = fresh_group();
  errors = on_ranks(2, h, [&](int) {
    tensor t({8});
    broadcast(t, 5, h);
  });
  // The same root everywhere, but not a rank: a usage error, not a mismatch.
  for (auto& e : errors) {
    BOOST_TEST(e.rfind("[usage] ", 0) == 0, e);
    BOOST_TEST(e.find("out of range") != std::string::npos, e);
  }
}

BOOST_AUTO_TEST_CASE(different_collectives_on_different_ranks_fail_cleanly) {
  // Then the group goes on: whatever the others sent with their call
  // (a small all-reduce's data rides with its start) was taken in.
  for (int n : {3, 4, 8})
    for (bool with_data : {false, true}) {
      auto g = fresh_group();
      constexpr int barrier_line = __LINE__ + 6;
      auto errors = on_ranks(n, g, [&](int r) {
        std::vector<tensor> all;
        auto t = rank_input(r, 10);
        try {
          if (r == n - 1)
            barrier(g);
          else if (with_data)
            allreduce(t, g);
          else
            allgather(all, rank_input(r, 4), g);
          EXPECT(false);
        } catch (const collective_error& e) {
          std::string what = e.what();
          EXPECT(what.find("every rank must call the same collective") !=
                 std::string::npos);
          // The barrier's caller, and one of the others' (their line is
          // the all-reduce's or the all-gather's).
          EXPECT(what.find(called_here(n - 1, barrier_line, 1)) !=
                 std::string::npos);
          EXPECT(what.find(" called at collective_errors.cpp:" +
                           std::to_string(barrier_line + (with_data ? 2 : 4)) +
                           " as operation 1") != std::string::npos);
        }
        allreduce(t, g);
        EXPECT(matches(t, reduce_op::sum, n));
      });
      for (auto& e : errors)
        BOOST_TEST(e.empty(), "n=" << n << ": " << e);
    }
}

BOOST_AUTO_TEST_CASE(lengths_across_an_algorithm_threshold_fail_and_go_on) {
  // 16384 floats are 64 KiB: a small all-reduce's algorithm; one more is
  // a large one's. Agreeing by doubling, every rank names the same pair.
  for (int n : {3, 4}) {
    auto g = fresh_group();
    std::vector<std::string> seen(static_cast<size_t>(n));
    constexpr int line = __LINE__ + 4;
    auto errors = on_ranks(n, g, [&](int r) {
      auto t = rank_input(r, r == 1 ? 16385 : 16384);
      try {
        allreduce(t, g);
        EXPECT(false);
      } catch (const collective_error& e) {
        seen[static_cast<size_t>(r)] = e.what();
      }
      auto u = rank_input(r, 100);
      allreduce(u, g);
      EXPECT(matches(u, reduce_op::sum, n));
    });
    for (auto& e : errors)
      BOOST_TEST(e.empty(), "n=" << n << ": " << e);
    for (auto& s : seen) {
      BOOST_TEST(s.find("rank 1 passed 16385 float32") != std::string::npos, s);
      BOOST_TEST(s.find(called_here(1, line, 1)) != std::string::npos, s);
      if (n == 4 && test_backend == backend::processes)
        BOOST_TEST(s == seen[0]);
    }
  }
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
  auto code = lumen::errc::unspecified;
  try {
    barrier(g);
  } catch (const collective_error& e) {
    seen = e.what();
    code = e.code();
  }
  BOOST_TEST(seen.find("rank 1 left the group") != std::string::npos, seen);
  BOOST_TEST(lumen::to_string(code) == "peer_lost");
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
  BOOST_CHECK_EXCEPTION(set_timeout("t", std::chrono::milliseconds(0)),
                        collective_error, [](const collective_error& e) {
                          return e.code() == lumen::errc::usage &&
                                 std::string{e.what()}.find("positive") !=
                                   std::string::npos;
                        });
  BOOST_CHECK_EXCEPTION(
    init_group(4, 4, "x"), collective_error, [](const collective_error& e) {
      return e.code() == lumen::errc::usage &&
             std::string{e.what()}.find("ranks 0 to 3") != std::string::npos;
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
  // Two members claim rank 0 at once: one holds it (with processes, it
  // waits inside init_group for the others, who never all come), and the
  // other hears at once that two members claim it. Which is which is the
  // scheduler's choice; the failure shows the rank is held.
  set_timeout(g, std::chrono::milliseconds(3000));
  std::string claims[2];
  std::atomic<int> refused{-1}; // the claimant that failed first
  std::atomic<bool> stay{true};
  auto claim = [&](int i) {
    try {
      join(2, 0, g);
      while (stay)
        std::this_thread::yield(); // stays a member until told
      destroy_group(g);
    } catch (const collective_error& e) {
      claims[i] = e.what();
      int none = -1;
      refused.compare_exchange_strong(none, i);
    }
  };
  std::thread one{claim, 0}, other{claim, 1};
  auto answered = lumen::util::spin_until([&] { return refused >= 0; },
                                          std::chrono::steady_clock::now() +
                                            std::chrono::seconds(30),
                                          lumen::util::poll_pause::yield);
  BOOST_TEST(answered, "neither claimant of rank 0 was refused");
  int holder = 1 - refused;
  if (answered) {
    auto& second = claims[refused];
    BOOST_TEST(second.find("two members claim it") != std::string::npos,
               second);
  }
  std::string sizes_error;
  std::thread sizes{[&] {
    try {
      join(3, 1, g);
    } catch (const collective_error& e) {
      sizes_error = e.what();
    }
  }};
  sizes.join();
  BOOST_TEST(sizes_error.find("same world_size") != std::string::npos,
             sizes_error);
  stay = false;
  one.join();
  other.join();
  if (answered && test_backend == backend::processes) // it met the member of 3
    BOOST_TEST(claims[holder].find("same world_size") != std::string::npos,
               claims[holder]);
}

BOOST_AUTO_TEST_CASE(a_member_that_never_comes_fails_the_others_in_time) {
  auto g = fresh_group();
  auto start = std::chrono::steady_clock::now();
  std::atomic<int> members{0};
  auto errors = on_ranks(3, g, [&](int r) {
    set_timeout(g, std::chrono::milliseconds(300));
    ++members;
    if (r == 2) {
      // Leaves without taking part, once the others joined: had its thread
      // run first, it would have left as the last member, the name would
      // be free, and the others would make a new group and wait for it.
      lumen::util::spin_until([&] { return members == 3; },
                              std::chrono::steady_clock::now() +
                                std::chrono::seconds(30),
                              lumen::util::poll_pause::yield);
      return;
    }
    auto t = rank_input(r, 100);
    allreduce(t, g);
  });
  auto took =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
  BOOST_TEST(took < 5.0);
  // It left (destroy_group) before or while they waited: a lost peer.
  for (int r = 0; r < 2; ++r) {
    auto& e = errors[static_cast<size_t>(r)];
    BOOST_TEST(e.rfind("[peer_lost] ", 0) == 0, e);
    BOOST_TEST(e.find("rank") != std::string::npos, e);
  }
}

BOOST_AUTO_TEST_CASE(a_member_that_stays_but_never_calls_times_the_others_out) {
  auto g = fresh_group();
  char folder[] = "/tmp/lumen-flight-XXXXXX";
  BOOST_REQUIRE(::mkdtemp(folder) != nullptr);
  set_flight_records_dir(folder);
  std::atomic<int> failed{0};
  constexpr int barrier_line = __LINE__ + 3;
  auto errors = on_ranks(3, g, [&](int r) {
    set_timeout(g, std::chrono::milliseconds(300));
    barrier(g);
    if (r == 2) {
      while (failed < 2) // a member still, until the others gave up
        std::this_thread::yield();
      return;
    }
    try {
      auto t = rank_input(r, 100);
      allreduce(t, g);
    } catch (const collective_error&) {
      ++failed;
      throw;
    }
  });
  for (int r = 0; r < 2; ++r) {
    auto& e = errors[static_cast<size_t>(r)];
    BOOST_TEST(e.rfind("[timeout] ", 0) == 0, e);
    BOOST_TEST((e.find("rank 2 ") != std::string::npos ||
                e.find("rank(s) 2,") != std::string::npos),
               e);
    // In one process: where the waiting member called, and where the one
    // that did not come was last seen.
    if (test_backend == backend::threads) {
      auto waiting = called_here(0, barrier_line + 8, 2);
      auto waiting_too = called_here(1, barrier_line + 8, 2);
      BOOST_TEST((e.find(waiting) != std::string::npos ||
                  e.find(waiting_too) != std::string::npos),
                 e);
      BOOST_TEST(e.find("last seen: barrier, " +
                        called_here(2, barrier_line, 1)) != std::string::npos,
                 e);
    }
    // The flight records of all three (rank 2 answers from its own
    // thread, or its records are here), and who is behind, in words.
    auto file = std::string{folder} + "/flight-" + g + ".json";
    BOOST_TEST(e.find("flight records of 3 of 3 members in " + file) !=
                 std::string::npos,
               e);
    BOOST_TEST(e.find("rank 2 is behind by 1 operation: outside any "
                      "collective for ") != std::string::npos,
               e);
    BOOST_TEST(e.find("last called barrier at collective_errors.cpp:" +
                      std::to_string(barrier_line) + " as operation 1") !=
                 std::string::npos,
               e);
  }
  // The file says the same to a tool.
  std::ifstream in{std::string{folder} + "/flight-" + g + ".json"};
  auto doc = nlohmann::json::parse(in, nullptr, false);
  BOOST_REQUIRE(doc.is_object());
  BOOST_TEST(doc["group"] == g);
  BOOST_TEST(doc["members"].size() == 3u);
  BOOST_REQUIRE(doc["behind"].size() == 1u);
  BOOST_TEST(doc["behind"][0]["rank"] == 2);
  BOOST_TEST(doc["behind"][0]["operations_behind"] == 1);
  for (auto& m : doc["members"]) {
    bool late = m["rank"] == 2;
    // A waiting member whose own timeout came first has failed already.
    if (late)
      BOOST_TEST(m["state"] == "outside");
    else
      BOOST_TEST((m["state"] == "in_collective" || m["state"] == "failed"),
                 m["state"]);
    BOOST_TEST(m["operations"] == (late ? 1 : 2));
    BOOST_TEST(m["records"][0]["op"] == "barrier");
    BOOST_TEST(m["records"][0]["state"] == "done");
    BOOST_TEST(m["records"][0]["site"] ==
               "collective_errors.cpp:" + std::to_string(barrier_line));
  }
  set_flight_records_dir("");
  std::filesystem::remove_all(folder);
}

BOOST_AUTO_TEST_SUITE_END()
