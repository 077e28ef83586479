#pragma once

// The ring all-reduce's schedule and reductions, in plain C++ (no CAF):
// the collective groups, the tests, ml_scratch03's --step and a browser
// playground all drive this one piece of code.
//
// N ranks stand in a ring: rank r sends to rank r+1 and receives from rank
// r-1 (mod N). A buffer of L elements is cut into N chunks; the first
// L mod N chunks get one element more than the others.
//
//   Reduce-scatter, steps s = 0 .. N-2: rank r sends chunk (r - s) mod N
//   and receives chunk (r - s - 1) mod N, which it reduces into its own
//   copy of that chunk. The chunk a rank receives at step s carries the
//   values of s+1 ranks; once it has its own added, s+2. After N-1 steps
//   rank r holds chunk (r + 1) mod N reduced over all N ranks.
//
//   All-gather, steps s = 0 .. N-2: rank r sends chunk (r + 1 - s) mod N,
//   which is complete, and receives chunk (r - s) mod N, which it copies
//   over its own. After N-1 steps every rank holds every reduced chunk.
//
// Each step a rank sends one chunk, about S/N bytes for a buffer of S
// bytes; over the 2(N-1) steps that is 2·S·(N-1)/N bytes per rank, which
// no algorithm can beat for large S (each rank must send its S·(N-1)/N
// bytes of partial sums out and get the same amount of results back).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lumen::collective {

enum class reduce_op { sum, product, min, max, average };

/// "sum", ...
const char* to_string(reduce_op op) noexcept;

/// Elements [begin, end) of a buffer.
struct chunk {
  size_t begin = 0;
  size_t end = 0;

  size_t size() const noexcept {
    return end - begin;
  }
};

/// Chunk `c` of a buffer of `length` elements cut into `parts` chunks.
chunk chunk_of(size_t length, size_t parts, size_t c) noexcept;

enum class ring_phase { reduce_scatter, all_gather };

/// "reduce-scatter", "all-gather".
const char* to_string(ring_phase phase) noexcept;

/// What one rank does at one step: the chunk it sends to rank+1 and the
/// chunk it receives from rank-1 (and reduces, or copies).
struct ring_step {
  ring_phase phase = ring_phase::reduce_scatter;
  size_t step = 0;
  size_t send_chunk = 0;
  size_t recv_chunk = 0;
};

/// The schedule of the comment above, for `rank` of `ranks` at `step`
/// (0 .. ranks-2) of `phase`.
ring_step ring_schedule(ring_phase phase, size_t rank, size_t ranks,
                        size_t step) noexcept;

/// acc[i] = op(acc[i], in[i]) for i < n. `average` adds; `finish` divides.
template <class T>
void reduce_into(T* acc, const T* in, size_t n, reduce_op op) {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::average:
      for (size_t i = 0; i < n; ++i)
        acc[i] += in[i];
      break;
    case reduce_op::product:
      for (size_t i = 0; i < n; ++i)
        acc[i] *= in[i];
      break;
    case reduce_op::min:
      for (size_t i = 0; i < n; ++i)
        acc[i] = std::min(acc[i], in[i]);
      break;
    case reduce_op::max:
      for (size_t i = 0; i < n; ++i)
        acc[i] = std::max(acc[i], in[i]);
      break;
  }
}

/// The last touch of a reduction over `ranks` ranks: `average` divides.
template <class T>
void finish(T* buf, size_t n, reduce_op op, size_t ranks) {
  if (op != reduce_op::average || ranks == 0)
    return;
  for (size_t i = 0; i < n; ++i)
    buf[i] = static_cast<T>(buf[i] / static_cast<T>(ranks));
}

/// One step of a whole ring, as `simulate_allreduce` reports it.
struct ring_snapshot {
  ring_phase phase;
  size_t step;
  std::vector<ring_step> ranks; // what each rank sent and received
};

/// Runs the ring all-reduce over `bufs` (one per rank, equal lengths) in
/// memory, step by step, calling `observe(snapshot, bufs)` after each step;
/// returns the bytes each rank sent. The reference the real transports are
/// tested against, and what ml_scratch03 shows.
template <class T, class Observer>
std::vector<size_t> simulate_allreduce(std::vector<std::vector<T>>& bufs,
                                       reduce_op op, Observer&& observe) {
  size_t n = bufs.size();
  std::vector<size_t> sent(n, 0);
  if (n == 0)
    return sent;
  size_t length = bufs[0].size();
  for (auto phase : {ring_phase::reduce_scatter, ring_phase::all_gather}) {
    for (size_t s = 0; s + 1 < n; ++s) {
      ring_snapshot snap{phase, s, {}};
      // Every rank sends first, from the buffers as they were before the
      // step, as real peers do in parallel.
      std::vector<std::vector<T>> wire(n);
      for (size_t r = 0; r < n; ++r) {
        auto st = ring_schedule(phase, r, n, s);
        auto c = chunk_of(length, n, st.send_chunk);
        wire[r].assign(bufs[r].begin() + c.begin, bufs[r].begin() + c.end);
        sent[r] += c.size() * sizeof(T);
        snap.ranks.push_back(st);
      }
      for (size_t r = 0; r < n; ++r) {
        auto& in = wire[(r + n - 1) % n];
        auto c = chunk_of(length, n, snap.ranks[r].recv_chunk);
        if (phase == ring_phase::reduce_scatter)
          reduce_into(bufs[r].data() + c.begin, in.data(), c.size(), op);
        else
          std::copy(in.begin(), in.end(), bufs[r].begin() + c.begin);
      }
      observe(static_cast<const ring_snapshot&>(snap),
              static_cast<const std::vector<std::vector<T>>&>(bufs));
    }
  }
  for (auto& b : bufs)
    finish(b.data(), b.size(), op, n);
  return sent;
}

/// Bytes each rank of a ring all-reduce sends for `length` elements of
/// `elem_size` bytes over `ranks` ranks: the sum of the chunks it sends,
/// which is 2·S·(N-1)/N when N divides the length.
size_t ring_bytes_per_rank(size_t length, size_t elem_size, size_t ranks,
                           size_t rank) noexcept;

} // namespace lumen::collective
