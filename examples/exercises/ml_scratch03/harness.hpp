#pragma once

// The ring of ml_scratch03: N ranks, each with its own buffer, that send
// one chunk to the next rank per step. The learner's loops (starter.cpp)
// say which chunk each rank sends and what it does with the one it gets;
// this file carries the chunks, shows each step (--step), and checks the
// result (--check). Plain C++ on lumen/collective/ring.hpp, no actors: a run is
// the same every time.

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <lumen/collective/ring.hpp>

#include "../exercise.hpp"

namespace scratch03 {

using lumen::collective::chunk;

/// What one rank received at the end of a step.
struct message {
  size_t chunk_index;
  std::vector<float> values;
};

using exercise::step_mode;

class ring_net {
public:
  ring_net(std::vector<std::vector<float>> buffers, step_mode mode)
    : bufs_(std::move(buffers))
    , mode_(mode)
    , sent_(bufs_.size(), 0)
    , outbox_(bufs_.size()) {}

  size_t ranks() const {
    return bufs_.size();
  }

  size_t length() const {
    return bufs_.empty() ? 0 : bufs_[0].size();
  }

  /// Chunk `c` of every rank's buffer: elements [begin, end).
  chunk chunk_at(size_t c) const {
    return lumen::collective::chunk_of(length(), ranks(), c);
  }

  std::vector<float>& buffer(size_t rank) {
    return bufs_.at(rank);
  }

  /// Rank `rank` sends chunk `c` of its buffer to rank `rank`+1; it
  /// arrives when the step ends.
  void send(size_t rank, size_t c) {
    if (!step_span_)
      step_span_.emplace("ring step", "exercise").arg("step", steps_ + 1);
    auto ch = chunk_at(c % ranks());
    outbox_.at(rank) = {c % ranks(),
                        std::vector<float>(bufs_[rank].begin() + ch.begin,
                                           bufs_[rank].begin() + ch.end)};
    sent_[rank] += ch.size() * sizeof(float);
  }

  /// Ends a step of `phase`: rank r gets what rank r-1 sent. Returns what
  /// each rank received; `show` it once the learner's code used it.
  std::vector<message> end_step(const std::string& phase) {
    step_span_.reset();
    std::vector<message> in(ranks());
    for (size_t r = 0; r < ranks(); ++r)
      in[r] = outbox_[(r + ranks() - 1) % ranks()];
    phase_ = phase;
    last_ = in;
    outbox_.assign(ranks(), {});
    return in;
  }

  /// Shows the step just ended: what each rank sent and received, and its
  /// buffer now (--step); waits for Enter unless --step=auto or json.
  void show() {
    if (mode_ == step_mode::none)
      return;
    ++steps_;
    if (mode_ == step_mode::json) {
      std::cout << json_state() << "\n";
      return;
    }
    std::cout << "step " << steps_ << " (" << phase_ << ")\n";
    for (size_t r = 0; r < ranks(); ++r) {
      auto from = (r + ranks() - 1) % ranks();
      std::cout << "  rank " << r << ": got chunk " << last_[r].chunk_index
                << " from rank " << from << ", buffer "
                << exercise::list(bufs_[r]) << "\n";
    }
    exercise::wait_for_enter(mode_, "step");
  }

  const std::vector<size_t>& bytes_sent() const {
    return sent_;
  }

  const std::vector<std::vector<float>>& buffers() const {
    return bufs_;
  }

private:
  std::string json_state() const {
    std::ostringstream out;
    out << "{\"step\": " << steps_ << ", \"phase\": \"" << phase_
        << "\", \"ranks\": [";
    for (size_t r = 0; r < ranks(); ++r) {
      out << (r ? ", " : "") << "{\"rank\": " << r
          << ", \"sent_chunk\": " << last_[(r + 1) % ranks()].chunk_index
          << ", \"received_chunk\": " << last_[r].chunk_index
          << ", \"buffer\": " << exercise::list(bufs_[r]) << "}";
    }
    out << "]}";
    return out.str();
  }

  std::vector<std::vector<float>> bufs_;
  step_mode mode_;
  std::vector<size_t> sent_;
  std::vector<message> outbox_;
  std::vector<message> last_;
  std::string phase_;
  int steps_ = 0;
  // A trace's span of the step under way: from its first send to its end.
  std::optional<lumen::trace::span> step_span_;
};

/// The learner's two loops; starter.cpp and solution.cpp define them.
void reduce_scatter(ring_net& net);
void all_gather(ring_net& net);

/// Rank r's element i in every case: small integers, so sums are exact.
inline float input(size_t r, size_t i) {
  return static_cast<float>((r + 1) * 10 + i % 7);
}

inline float expected_sum(size_t ranks, size_t i) {
  float s = 0;
  for (size_t r = 0; r < ranks; ++r)
    s += input(r, i);
  return s;
}

inline std::vector<std::vector<float>> inputs(size_t ranks, size_t length) {
  std::vector<std::vector<float>> bufs(ranks, std::vector<float>(length));
  for (size_t r = 0; r < ranks; ++r)
    for (size_t i = 0; i < length; ++i)
      bufs[r][i] = input(r, i);
  return bufs;
}

/// Runs the learner's all-reduce on fixed cases; prints each verdict and
/// PASS or FAIL. Returns the exit code.
inline int check() {
  struct case_t {
    size_t ranks, length;
  };
  int failed = 0;
  for (auto c : {case_t{2, 6}, case_t{3, 7}, case_t{4, 8}, case_t{4, 1000},
                 case_t{5, 3}}) {
    ring_net net{inputs(c.ranks, c.length), step_mode::none};
    reduce_scatter(net);
    // After reduce-scatter, rank r must own chunk r+1, fully summed.
    std::string what;
    for (size_t r = 0; r < c.ranks && what.empty(); ++r) {
      auto ch = net.chunk_at((r + 1) % c.ranks);
      for (size_t i = ch.begin; i < ch.end && what.empty(); ++i)
        if (net.buffers()[r][i] != expected_sum(c.ranks, i))
          what = "after reduce-scatter, rank " + std::to_string(r) + " holds " +
                 std::to_string(net.buffers()[r][i]) + " at element " +
                 std::to_string(i) + " of its chunk " +
                 std::to_string((r + 1) % c.ranks) + ", expected " +
                 std::to_string(expected_sum(c.ranks, i)) +
                 ": see TODO(ml_scratch03a) in reduce_scatter";
    }
    if (what.empty()) {
      all_gather(net);
      for (size_t r = 0; r < c.ranks && what.empty(); ++r)
        for (size_t i = 0; i < c.length && what.empty(); ++i)
          if (net.buffers()[r][i] != expected_sum(c.ranks, i))
            what = "after all-gather, rank " + std::to_string(r) + " holds " +
                   std::to_string(net.buffers()[r][i]) + " at element " +
                   std::to_string(i) + ", expected " +
                   std::to_string(expected_sum(c.ranks, i)) +
                   ": see TODO(ml_scratch03a) in all_gather";
    }
    for (size_t r = 0; r < c.ranks && what.empty(); ++r) {
      auto want = lumen::collective::ring_bytes_per_rank(
        c.length, sizeof(float), c.ranks, r);
      if (net.bytes_sent()[r] != want)
        what = "rank " + std::to_string(r) + " sent " +
               std::to_string(net.bytes_sent()[r]) + " bytes, a ring sends " +
               std::to_string(want) +
               " (one chunk a step, 2(N-1) steps): send exactly once per "
               "rank and step";
    }
    std::cout << "case N=" << c.ranks << " length=" << c.length << ": "
              << (what.empty() ? "ok (every rank holds the sum, each sent "
                               : "FAIL ")
              << (what.empty() ? std::to_string(net.bytes_sent()[0]) + " bytes)"
                               : what)
              << "\n";
    failed += what.empty() ? 0 : 1;
  }
  if (failed == 0) {
    std::cout << "PASS\n";
    return 0;
  }
  std::cout << "FAIL: " << failed
            << " case(s) wrong; fix the TODO(ml_scratch03a) the first one "
               "names\n";
  return 1;
}

/// The program: --check, or one all-reduce of N = 4 ranks over 8 elements,
/// shown step by step with --step (Enter), --step=auto or --step=json.
inline int main_of(int argc, char** argv) {
  auto f = exercise::parse_flags(argc, argv);
  if (!f)
    return 2;
  if (f->check)
    return check();
  auto mode = f->step;
  exercise::traced_run traced;
  ring_net net{inputs(4, 8), mode};
  reduce_scatter(net);
  all_gather(net);
  if (mode != step_mode::json)
    for (size_t r = 0; r < net.ranks(); ++r) {
      std::cout << "rank " << r << ":";
      for (float x : net.buffers()[r])
        std::cout << " " << x;
      std::cout << "\n";
    }
  return 0;
}

} // namespace scratch03
