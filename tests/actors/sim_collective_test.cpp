#define BOOST_TEST_MODULE sim_collective
#include <boost/test/unit_test.hpp>

// Collectives on a simulated cluster (lumen/sim.hpp): members are actors
// on simulated nodes, their messages cost the links' latency and
// bandwidth, so the virtual time of a ring all-reduce is its closed form;
// a member whose node dies fails the others, naming it.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>
#include <lumen/sim.hpp>

#include "closed_forms.hpp"

namespace coll = lumen::collective;
using namespace std::chrono_literals;

namespace {

/// What one member saw of an all-reduce: wrong elements, virtual
/// nanoseconds of the barrier before it and of the all-reduce itself.
struct timing {
  int64_t wrong = 0;
  int64_t barrier_ns = 0;
  int64_t allreduce_ns = 0;
};

class Member {
public:
  Member(int world, int rank, std::string group)
    : world_(world)
    , rank_(rank)
    , group_(std::move(group)) {
    coll::init_group(world, rank, group_);
    coll::set_algorithm(group_, coll::allreduce_algorithm::ring);
  }

  /// A barrier (one round of agreement), then a sum all-reduce of
  /// closed_forms' rank input of `numel` floats, each timed.
  std::vector<int64_t> allreduce(int64_t numel) {
    auto t = lumen::test::rank_input(rank_, static_cast<size_t>(numel));
    auto start = lumen::sim::now();
    coll::barrier(group_);
    auto agreed = lumen::sim::now();
    coll::allreduce(t, group_, coll::reduce_op::sum);
    auto done = lumen::sim::now();
    int64_t wrong = 0;
    for (int64_t i = 0; i < numel; ++i)
      wrong += t.data<float>()[i] !=
               lumen::test::expected(coll::reduce_op::sum, world_,
                                     static_cast<size_t>(i));
    return {wrong, (agreed - start).count(), (done - agreed).count()};
  }

  /// An all-reduce that may fail: "ok", or the error and the virtual time
  /// it came at.
  std::string try_allreduce(int64_t numel) {
    auto t = lumen::test::rank_input(rank_, static_cast<size_t>(numel));
    try {
      coll::allreduce(t, group_, coll::reduce_op::sum);
      return "ok";
    } catch (const coll::collective_error& e) {
      return std::string{e.what()} + " @" +
             std::to_string(lumen::sim::now().count());
    }
  }

  /// All-reduces of 0, 1, 2 and 5 floats, as the group picks (direct,
  /// its payload in the agreement's message), then a ring of 5: "ok", or
  /// the first wrong sum or error.
  std::string small_ones() {
    coll::set_algorithm(group_, coll::allreduce_algorithm::automatic);
    try {
      for (int64_t n : {0, 1, 2, 5}) {
        auto t = lumen::test::rank_input(rank_, static_cast<size_t>(n));
        coll::allreduce(t, group_, coll::reduce_op::sum);
        for (int64_t i = 0; i < n; ++i)
          if (t.data<float>()[i] !=
              lumen::test::expected(coll::reduce_op::sum, world_,
                                    static_cast<size_t>(i)))
            return "wrong sum at n=" + std::to_string(n);
      }
      coll::set_algorithm(group_, coll::allreduce_algorithm::ring);
      return allreduce(5)[0] == 0 ? "ok" : "wrong ring sum";
    } catch (const coll::collective_error& e) {
      return e.what();
    }
  }

private:
  int world_;
  int rank_;
  std::string group_;
};

} // namespace

LUMEN_ACTOR(Member, &Member::allreduce, &Member::try_allreduce,
            &Member::small_ones);
LUMEN_ACTOR_CTOR(Member(int, int, std::string));

namespace {

/// The links of the runs: 50 µs, 10 Gbit/s.
constexpr double alpha = 50e-6;
constexpr double beta = 1.25e9;
/// Every message carries a channel's 16-byte frame header.
constexpr double header = 16;
/// An operation's descriptor: 48 bytes, and its caller's file:line in 48.
constexpr double descriptor = 96;
/// The ring sends a chunk in segments of at most this (ring.hpp).
constexpr double segment = 512 * 1024;

/// Starts a simulated run of `n` members on nodes 1 to n (the script on
/// node-0 calls them all at once, over links of one length, so they start
/// together) and returns their handles.
std::vector<lumen::ActorHandle<Member>> members(int n, const std::string& g) {
  lumen::init_options opts;
  opts.sim.enabled = true;
  opts.sim.nodes = n + 1;
  opts.sim.latency = std::chrono::microseconds(50);
  opts.sim.bandwidth = beta;
  lumen::init(opts);
  std::vector<lumen::ActorHandle<Member>> out;
  for (int r = 0; r < n; ++r)
    out.push_back(lumen::actor<Member>(n, r, g)
                    .on_node("node-" + std::to_string(r + 1))
                    .remote());
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sim_collective)

BOOST_AUTO_TEST_CASE(a_ring_allreduce_takes_its_closed_form_in_virtual_time) {
  for (int n = 2; n <= 8; ++n) {
    for (double bytes : {4096.0, 65536.0, 1048576.0, 4194304.0, 67108864.0}) {
      auto numel = static_cast<int64_t>(bytes / 4);
      // The all-reduce agrees first (as the barrier does), then rings.
      double agree = alpha + (header + descriptor) / beta;
      auto ms = members(n, "ring");
      std::vector<lumen::ObjectRef<std::vector<int64_t>>> runs;
      for (auto& m : ms)
        runs.push_back(m.call(&Member::allreduce, numel));
      double slowest = 0;
      for (auto& r : runs) {
        auto t = lumen::get(r);
        BOOST_TEST(t[0] == 0,
                   "wrong elements at n=" << n << " bytes=" << bytes);
        // A barrier is the agreement alone: a descriptor to every member.
        BOOST_TEST(std::abs(static_cast<double>(t[1]) / 1e9 - agree) < 1e-9);
        slowest = std::max(slowest, static_cast<double>(t[2]) / 1e9);
      }
      lumen::shutdown();
      double chunk = bytes / n;
      double closed = 2 * (n - 1) * (alpha + chunk / beta);
      double ring = slowest - agree; // the ring's own time
      BOOST_TEST_MESSAGE("n=" << n << " bytes=" << bytes << " ring "
                              << ring * 1e6 << " us, closed form "
                              << closed * 1e6 << " us, ratio "
                              << ring / closed);
      if (chunk <= segment) {
        // A chunk is one message: step after step, each its latency and
        // its bytes on the wire; the closed form, but for the headers.
        BOOST_TEST(std::abs(ring - closed) / closed < 0.01,
                   "n=" << n << " bytes=" << bytes << ": " << ring * 1e6
                        << " us against the closed form's " << closed * 1e6);
      } else {
        // Segments forward as they come, so the link never waits for a
        // step: all its bytes back to back, and one latency at the end.
        double pieces = std::ceil(chunk / segment);
        double piped = 2 * (n - 1) * (chunk + pieces * header) / beta + alpha;
        BOOST_TEST(std::abs(ring - piped) / piped < 0.01,
                   "n=" << n << " bytes=" << bytes << ": " << ring * 1e6
                        << " us against the pipelined form's " << piped * 1e6);
        BOOST_TEST(ring <= closed); // the pipeline beats the steps
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(empty_and_tiny_buffers_keep_the_group_in_step) {
  for (int n : {2, 3, 4}) {
    auto ms = members(n, "small");
    std::vector<lumen::ObjectRef<std::string>> runs;
    for (auto& m : ms)
      runs.push_back(m.call(&Member::small_ones));
    for (auto& r : runs)
      BOOST_TEST(lumen::get(r) == "ok", "n=" << n);
    lumen::shutdown();
  }
}

BOOST_AUTO_TEST_CASE(a_member_killed_mid_allreduce_fails_the_others_naming_it) {
  auto ms = members(4, "doomed");
  std::vector<lumen::ObjectRef<std::string>> runs;
  for (auto& m : ms)
    runs.push_back(m.call(&Member::try_allreduce, int64_t{16} << 20));
  // Rank 2 is on node-3; 64 MiB take about 80 ms of the links' time.
  auto killed_at = lumen::sim::now() + 10ms;
  lumen::sim::kill_node("node-3", killed_at);
  for (int r = 0; r < 4; ++r) {
    if (r == 2) {
      BOOST_CHECK_THROW(lumen::get(runs[2]), lumen::actor_died);
      continue;
    }
    auto what = lumen::get(runs[static_cast<size_t>(r)]);
    BOOST_TEST(what.find("rank 2 is gone (its node node-3 died)") !=
                 std::string::npos,
               "rank " << r << ": " << what);
    auto at = std::stoll(what.substr(what.rfind('@') + 1));
    BOOST_TEST(at - killed_at.count() <= std::chrono::nanoseconds(2s).count());
  }
  lumen::shutdown();
}

BOOST_AUTO_TEST_SUITE_END()
