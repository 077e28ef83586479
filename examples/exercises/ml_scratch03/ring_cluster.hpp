#pragma once

// Part 03b's cluster: N ring peers, Lumen actors on simulated nodes node-1
// to node-N, links of 50 us at 1 Gbit/s. A peer's ring_link is its two
// neighbours (the collectives' send and recv in the group "ring") and
// counts what it sends; the checks run the learner's peers for N = 2..8,
// then kill one mid-ring.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <lumen/collective/ring.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>
#include <lumen/sim.hpp>

#include "../exercise.hpp"

namespace scratch03 {

namespace coll = lumen::collective;
using exercise::step_mode;

/// What each rank sent last, for --step: the chunk's values.
inline std::vector<std::vector<float>>& last_sent() {
  static std::vector<std::vector<float>> sent;
  return sent;
}

/// A peer's place in the ring "ring": rank `rank` of `world`.
class ring_link {
public:
  ring_link(int world, int rank)
    : world_(world)
    , rank_(rank) {
    coll::init_group(world, rank, "ring");
  }

  int world() const {
    return world_;
  }
  int rank() const {
    return rank_;
  }

  /// Sends `values` to rank + 1; returns once that rank received them.
  void send_right(const std::vector<float>& values) {
    coll::send(values, (rank_ + 1) % world_, "ring");
    bytes_ += values.size() * sizeof(float);
    last_sent().resize(size_t(world_));
    last_sent()[size_t(rank_)] = values;
  }

  /// Receives what rank - 1 sends into `values`, which must have its size.
  void recv_left(std::vector<float>& values) {
    coll::recv(values, (rank_ + world_ - 1) % world_, "ring");
  }

  /// The bytes of values sent so far.
  uint64_t bytes_sent() const {
    return bytes_;
  }

private:
  int world_;
  int rank_;
  uint64_t bytes_ = 0;
};

/// Rank r's input: element i is (r + 1) * (i mod 3 + 1), so that the sum
/// over n ranks is n(n + 1)/2 * (i mod 3 + 1).
inline std::vector<float> input(int rank, size_t length) {
  std::vector<float> v(length);
  for (size_t i = 0; i < length; ++i)
    v[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 3 + 1));
  return v;
}

inline float sum_at(int n, size_t i) {
  return static_cast<float>(n * (n + 1) / 2 * static_cast<int>(i % 3 + 1));
}

constexpr size_t ring_length = 64 * 1024; // floats: 256 KiB a rank
constexpr double latency = exercise::link_latency,
                 bytes_per_second = exercise::link_bytes_per_second;

inline lumen::init_options ring_network(uint64_t seed, int n) {
  return exercise::gigabit_cluster(seed, n + 1);
}

/// What a ring whose ranks all send at once runs into: a send meets the
/// other's send, or waits for a receiver that never comes.
inline std::string explained(const std::string& what) {
  if (what.find("expected the start of recv") == std::string::npos &&
      what.find("during send") == std::string::npos)
    return what;
  return what +
         ". Every rank was in send_right at once: it returns once the right "
         "neighbour received, and that neighbour was sending too. Let even "
         "ranks send first and odd ones receive first: see "
         "TODO(ml_scratch03b) in RingPeer::allreduce";
}

/// One all-reduce of the learner's peers: its virtual time, the most bytes
/// a rank sent, and "" or what is wrong.
struct ring_run {
  double seconds = 0;
  uint64_t bytes = 0;
  std::string wrong;
};

template <class Peer>
ring_run run_ring(uint64_t seed, int n, size_t length, step_mode mode) {
  ring_run out;
  last_sent().clear();
  out.wrong =
    exercise::in_simulation(ring_network(seed, n), [&]() -> std::string {
      std::vector<lumen::ActorHandle<Peer>> peers;
      for (int r = 0; r < n; ++r)
        peers.push_back(lumen::actor<Peer>(n, r)
                          .on_node("node-" + std::to_string(r + 1))
                          .remote());
      for (auto& p : peers) // every peer in the ring before the timing
        lumen::get(p.call(&Peer::bytes_sent));
      // The all-reduce's time on the peers: from the first start to the
      // last finish.
      auto span = std::make_shared<std::pair<int64_t, int64_t>>(-1, 0);
      if (mode == step_mode::none)
        lumen::sim::on_event([span](const lumen::sim::event& e) {
          if (e.what.find("::allreduce") == std::string::npos)
            return;
          if (e.kind == "start" && span->first < 0)
            span->first = e.time.count();
          if (e.kind == "finish")
            span->second = e.time.count();
        });
      else
        // Beside a message, the chunk its sender sent last (send_right
        // returns once it is received: the one on its way); beside other
        // events, the chunk their node's rank sent last.
        exercise::step_events(mode, [](const lumen::sim::event& e, bool json) {
          auto& who = e.kind == "deliver" ? e.peer : e.node;
          if (who.empty() || who == "node-0")
            return std::string{};
          auto rank = size_t(std::stoi(who.substr(5))) - 1; // "node-3": 2
          if (rank >= last_sent().size())
            return std::string{};
          auto sent = exercise::list(last_sent()[rank]);
          return json ? "\"sent\": " + sent
                      : "rank " + std::to_string(rank) + " sent " + sent;
        });
      std::vector<lumen::ObjectRef<std::vector<float>>> sums;
      for (int r = 0; r < n; ++r)
        sums.push_back(peers[static_cast<size_t>(r)].call(&Peer::allreduce,
                                                          input(r, length)));
      auto got = lumen::get(sums);
      out.seconds = static_cast<double>(span->second - span->first) / 1e9;
      for (int r = 0; r < n; ++r) {
        auto& v = got[static_cast<size_t>(r)];
        if (v.size() != length)
          return "rank " + std::to_string(r) + " answered " +
                 std::to_string(v.size()) + " values for " +
                 std::to_string(length) + ": see TODO(ml_scratch03b)";
        for (size_t i = 0; i < length; ++i)
          if (v[i] != sum_at(n, i))
            return "rank " + std::to_string(r) + "'s element " +
                   std::to_string(i) + " is " + std::to_string(v[i]) +
                   ", the sum is " + std::to_string(sum_at(n, i)) +
                   ": see TODO(ml_scratch03b) in RingPeer::allreduce";
        out.bytes = std::max(
          out.bytes,
          lumen::get(peers[static_cast<size_t>(r)].call(&Peer::bytes_sent)));
      }
      return "";
    });
  out.wrong = explained(out.wrong);
  return out;
}

/// The learner's peers, N = 2..8 under `seed`: the sums, the bytes a rank
/// sends against 2·S·(N−1)/N, the ring's time against a naive gather's
/// (rank 0 takes every buffer, then sends the sum back). A table, and ""
/// or what is wrong.
template <class Peer>
std::string check_rings(uint64_t seed) {
  const double s = ring_length * sizeof(float);
  std::printf("  seed %llu:   N   ring ms  gather ms  bytes a rank  "
              "2S(N-1)/N\n",
              static_cast<unsigned long long>(seed));
  for (int n = 2; n <= 8; ++n) {
    auto r = run_ring<Peer>(seed, n, ring_length, step_mode::none);
    if (!r.wrong.empty())
      return "N=" + std::to_string(n) + ", " + r.wrong;
    double due = 2 * s * (n - 1) / n;
    double gather = 2 * (n - 1) * (latency + s / bytes_per_second);
    std::printf("            %3d %9.3f %10.3f %13llu %10.0f\n", n,
                r.seconds * 1e3, gather * 1e3,
                static_cast<unsigned long long>(r.bytes), due);
    // Chunks differ by a float at most.
    if (std::abs(static_cast<double>(r.bytes) - due) > 2.0 * n * sizeof(float))
      return "N=" + std::to_string(n) + ": a rank sent " +
             std::to_string(r.bytes) + " bytes, the ring sends 2·S·(N−1)/N = " +
             std::to_string(static_cast<uint64_t>(due)) +
             " (one chunk a step, 2(N−1) steps): see TODO(ml_scratch03b)";
    if (n > 2 && !(r.seconds < gather))
      return "N=" + std::to_string(n) + ": the ring took " +
             std::to_string(r.seconds * 1e3) + " ms, a naive gather " +
             std::to_string(gather * 1e3) +
             " ms: the ranks' sends must overlap, every rank sending at each "
             "step (see TODO(ml_scratch03b))";
  }
  return "";
}

/// Rank 2 of four dies mid-ring: every other rank's all-reduce fails
/// within 2 s of virtual time, naming it. "" or what is wrong.
template <class Peer>
std::string check_a_death(uint64_t seed) {
  return exercise::in_simulation(ring_network(seed, 4), [&]() -> std::string {
    std::vector<lumen::ActorHandle<Peer>> peers;
    for (int r = 0; r < 4; ++r)
      peers.push_back(lumen::actor<Peer>(4, r)
                        .on_node("node-" + std::to_string(r + 1))
                        .remote());
    for (auto& p : peers)
      lumen::get(p.call(&Peer::bytes_sent));
    std::vector<lumen::ObjectRef<std::vector<float>>> sums;
    for (int r = 0; r < 4; ++r)
      sums.push_back(peers[static_cast<size_t>(r)].call(&Peer::allreduce,
                                                        input(r, ring_length)));
    auto killed = lumen::sim::now() + std::chrono::milliseconds(2);
    lumen::sim::kill_node("node-3", killed);
    for (int r : {0, 1, 3}) {
      try {
        lumen::get(sums[static_cast<size_t>(r)]);
        return "rank " + std::to_string(r) +
               " answered although rank 2 died mid-ring";
      } catch (const lumen::error& e) {
        std::string what = e.what();
        if (what.find("rank 2") == std::string::npos)
          return "rank " + std::to_string(r) +
                 " failed without naming rank "
                 "2: " +
                 what;
      }
      if (lumen::sim::now() - killed > std::chrono::seconds(2))
        return "rank " + std::to_string(r) + " failed " +
               std::to_string((lumen::sim::now() - killed).count() / 1e9) +
               " s after rank 2 died, not within 2 s";
    }
    return "";
  });
}

template <class Peer>
int main_ring(int argc, char** argv) {
  auto f = exercise::parse_flags(argc, argv);
  if (!f)
    return 2;
  if (f->check || f->step == step_mode::none) {
    exercise::checker cases;
    exercise::under_each_seed(cases, "a ring of peers for N = 2..8",
                              check_rings<Peer>);
    if (cases.passing())
      cases.report("rank 2 of 4 dies mid-ring", check_a_death<Peer>(1));
    return cases.verdict();
  }
  // Three ranks, a buffer of 6: every message, event by event.
  auto r = run_ring<Peer>(1, 3, 6, f->step);
  if (!r.wrong.empty())
    std::cout << r.wrong << "\n";
  return r.wrong.empty() ? 0 : 1;
}

} // namespace scratch03
