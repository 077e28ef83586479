#include "collective/algorithms/algorithms.hpp"
#include "collective/algorithms/ring.hpp"

// Rabenseifner's all-reduce for a power-of-two group: reduce-scatter by
// recursive halving, all-gather by recursive doubling.

namespace lumen::collective::detail {

namespace {

/// A run of the buffer's blocks (block b is chunk_of(numel, N, b), as in
/// the ring) and where it lies in elements.
struct blocks {
  size_t lo, hi; // [lo, hi)
};

} // namespace

/*
 * log2 N steps each way, each an exchange with one partner, rank r XOR d,
 * in both directions at once.
 *   Reduce-scatter, d = N/2, N/4, ..., 1: the rank's run of blocks splits
 *   in two; the rank whose bit d is 0 keeps the lower half, its partner
 *   the upper one. Each sends the half it gives up and reduces the half
 *   it keeps with what comes in. After the last step rank r holds block r
 *   reduced over all ranks (an average divides it there).
 *   All-gather, d = 1, 2, ..., N/2: each sends all it holds complete and
 *   receives its partner's run, next to its own: the run doubles.
 * Bytes per rank: S/2 + S/4 + ... + S/N = S·(N-1)/N each way, as the
 * ring's 2·S·(N-1)/N, in 2·log2 N steps instead of 2(N-1): fewer rounds
 * that wait on another rank, which is what a busy machine pays for.
 * Each half leaves in segments, so a step's sending, receiving and
 * reducing overlap as the ring's do.
 */
void halving_doubling_allreduce(transport& t, char* data, ml::dtype type,
                                size_t numel, reduce_op op) {
  size_t n = static_cast<size_t>(t.world()), r = static_cast<size_t>(t.rank());
  auto elem = ml::size_of(type);
  auto seg = std::max<size_t>(1, segment_bytes / elem);
  auto& tmp = t.scratch(0, seg * elem);
  auto begin_of = [&](size_t b) {
    return b < n ? chunk_of(numel, n, b).begin : numel;
  };
  // Exchanges `out` for `in` with `partner`, segment by segment; each
  // segment that comes in is reduced into place (or copied there).
  auto step = [&](size_t partner, blocks out, blocks in, bool reduce,
                  bool complete) {
    exchange_plan plan;
    for (size_t b = begin_of(out.lo); b < begin_of(out.hi); b += seg)
      plan.out.push_back(
        {data + b * elem, (std::min(begin_of(out.hi), b + seg) - b) * elem});
    std::vector<std::pair<size_t, size_t>> pieces;
    for (size_t b = begin_of(in.lo); b < begin_of(in.hi); b += seg)
      pieces.emplace_back(b, std::min(begin_of(in.hi), b + seg));
    plan.pieces_in = pieces.size();
    plan.where = [&](size_t i) -> exchange_plan::piece {
      auto [b, e] = pieces[i];
      return {reduce ? tmp.data() : data + b * elem, (e - b) * elem};
    };
    plan.may_receive = [](size_t, size_t) { return true; };
    plan.done = [&](size_t i) {
      if (!reduce)
        return;
      auto [b, e] = pieces[i];
      with_type(type, [&](auto x) {
        using T = decltype(x);
        auto acc = reinterpret_cast<T*>(data + b * elem);
        reduce_into(acc, reinterpret_cast<const T*>(tmp.data()), e - b, op);
        if (complete)
          finish(acc, e - b, op, n);
      });
    };
    t.exchange(static_cast<int>(partner), static_cast<int>(partner), plan,
               "allreduce");
  };
  blocks mine{0, n};
  for (size_t d = n / 2; d >= 1; d /= 2) {
    size_t partner = r ^ d, mid = mine.lo + (mine.hi - mine.lo) / 2;
    blocks low{mine.lo, mid}, high{mid, mine.hi};
    bool keep_low = (r & d) == 0;
    mine = keep_low ? low : high;
    step(partner, keep_low ? high : low, mine, true, d == 1);
  }
  for (size_t d = 1; d < n; d *= 2) {
    size_t partner = r ^ d, size = mine.hi - mine.lo;
    blocks theirs = (r & d) == 0 ? blocks{mine.hi, mine.hi + size}
                                 : blocks{mine.lo - size, mine.lo};
    step(partner, mine, theirs, false, false);
    mine = {std::min(mine.lo, theirs.lo), std::max(mine.hi, theirs.hi)};
  }
}

} // namespace lumen::collective::detail
