#pragma once

// The ring over a transport, planned as segments and run as one exchange;
// used by the all-reduce, the allgather and the reducescatter.

#include <optional>
#include <vector>

#include "lumen/trace.hpp"

#include "collective/reduce.hpp"
#include "collective/transport.hpp"

namespace lumen::collective::detail {

/// Data leaves in pieces of this size: large enough that a piece costs
/// one system call for half a megabyte, small enough that the next
/// rank starts on a chunk while the rest of it is still on its way.
inline constexpr size_t segment_bytes = 512 * 1024;

/*
 * The ring, over the transport to rank r+1 (right) and from rank r-1
 * (left). The buffer's N chunks move as ring.hpp's schedule says. Each
 * chunk leaves in segments; a rank forwards each segment of the chunk it
 * receives as soon as that segment is reduced (reduce-scatter) or copied
 * (all-gather), because the chunk it receives at step s is the one it
 * sends at step s+1. So segment k of a chunk goes out while segment k+1
 * comes in and the right-hand rank reduces segment k-1: sending,
 * receiving and reducing overlap, and a step costs about the time of its
 * chunk on the wire, not a round trip per chunk. The whole operation is
 * planned first (which segment goes where, and which may not be
 * overwritten before it left) and then run by one loop that sends and
 * receives at once (transport::exchange).
 *
 * Bytes on the wire per rank: one chunk per step, 2(N-1) steps, about
 * 2·S·(N-1)/N for S bytes (ring_bytes_per_rank, exactly), plus 16 bytes of
 * frame header per segment and one op descriptor per peer.
 */
class ring_run {
public:
  ring_run(transport& t, char* data, ml::dtype type, size_t numel,
           const char* doing)
    : t_(t)
    , n_(static_cast<size_t>(t.world()))
    , r_(static_cast<size_t>(t.rank()))
    , data_(data)
    , type_(type)
    , elem_(ml::size_of(type))
    , numel_(numel)
    , seg_(std::max<size_t>(1, segment_bytes / elem_))
    , last_send_(n_, 0)
    , tmp_(t.scratch(0, seg_ * elem_))
    , doing_(doing) {}

  /// Sends chunk `c` to the right first (a ring of one has nobody to
  /// send to).
  void send_chunk(size_t c) {
    if (n_ == 1)
      return;
    auto ch = chunk_of(numel_, n_, c);
    for (size_t b = ch.begin; b < ch.end; b += seg_) {
      auto e = std::min(ch.end, b + seg_);
      plan_.out.push_back({data_ + b * elem_, (e - b) * elem_});
      last_send_[c] = ++sends_;
    }
  }

  /// N-1 steps; at step s the chunk (r - s - offset) mod N comes in from
  /// the left and is reduced with `op` (or, if `reduce` is false, copied
  /// in), then forwarded, except at the last step unless `forward_last`.
  /// A reduction's last step completes the rank's own chunk: an average
  /// divides it there, while it is in cache and 1/N of the buffer, and
  /// the all-gather spreads the quotient.
  void pass(size_t offset, bool reduce, reduce_op op, bool forward_last) {
    op_ = op;
    // What went out of each chunk before this pass: a chunk copied in must
    // have left first. (Not this pass's own forwards: waiting for those
    // would wait for the right-hand rank, which may wait for its own.)
    auto before = last_send_;
    for (size_t s = 0; s + 1 < n_; ++s) {
      size_t c = (r_ + 2 * n_ - s - offset) % n_;
      auto ch = chunk_of(numel_, n_, c);
      bool forward = s + 2 < n_ || forward_last;
      for (size_t b = ch.begin; b < ch.end; b += seg_) {
        pieces_.push_back({b, std::min(ch.end, b + seg_), reduce,
                           reduce && s + 2 == n_, forward,
                           reduce ? 0 : before[c], s, c, false});
        if (forward)
          last_send_[c] = ++sends_;
      }
      if (ch.end > ch.begin)
        pieces_.back().ends_step = true;
    }
  }

  /// Runs what was planned, sending and receiving at once.
  void run() {
    if (n_ == 1)
      return;
    plan_.pieces_in = pieces_.size();
    // A trace shows each step from the end of the one before to its last
    // segment in: segments pipeline, so steps have no other borders.
    std::optional<trace::span> step;
    auto next_step = [&](size_t i) {
      if (i < pieces_.size() && trace::enabled())
        step
          .emplace(pieces_[i].reduce ? "reduce-scatter step"
                                     : "all-gather step",
                   "collective")
          .arg("step", static_cast<int64_t>(pieces_[i].step))
          .arg("bytes", static_cast<int64_t>(chunk_bytes(i)));
    };
    next_step(0);
    plan_.where = [this](size_t i) -> exchange_plan::piece {
      auto& p = pieces_[i];
      auto bytes = (p.end - p.begin) * elem_;
      return {p.reduce ? tmp_.data() : data_ + p.begin * elem_, bytes};
    };
    plan_.may_receive = [this](size_t i, size_t sent) {
      return sent >= pieces_[i].after_sends;
    };
    plan_.done = [&](size_t i) {
      auto& p = pieces_[i];
      char* at = data_ + p.begin * elem_;
      if (p.reduce)
        with_type(type_, [&](auto t) {
          using T = decltype(t);
          auto acc = reinterpret_cast<T*>(at);
          reduce_into(acc, reinterpret_cast<const T*>(tmp_.data()),
                      p.end - p.begin, op_);
          if (p.complete)
            finish(acc, p.end - p.begin, op_, n_);
        });
      if (p.forward)
        plan_.out.push_back({at, (p.end - p.begin) * elem_});
      if (p.ends_step) {
        step.reset();
        next_step(i + 1);
      }
    };
    t_.exchange(static_cast<int>((r_ + 1) % n_),
                static_cast<int>((r_ + n_ - 1) % n_), plan_, doing_);
  }

private:
  /// A segment coming in: where, what to do with it, and how many sends
  /// must be out before it may overwrite its place.
  struct piece {
    size_t begin, end;
    bool reduce, complete, forward;
    size_t after_sends;
    size_t step, chunk; // of its pass
    bool ends_step;     // its chunk's last segment
  };

  /// The bytes of the chunk piece `i` is part of.
  size_t chunk_bytes(size_t i) const {
    auto ch = chunk_of(numel_, n_, pieces_[i].chunk);
    return (ch.end - ch.begin) * elem_;
  }

  transport& t_;
  size_t n_, r_;
  char* data_;
  ml::dtype type_;
  size_t elem_, numel_, seg_;
  std::vector<size_t> last_send_; // per chunk: how many sends up to its last
  size_t sends_ = 0;
  std::vector<char>& tmp_;
  const char* doing_;
  reduce_op op_ = reduce_op::sum;
  std::vector<piece> pieces_;
  exchange_plan plan_;
};

} // namespace lumen::collective::detail
