#include "lumen/collective/ring.hpp"

namespace lumen::collective {

const char* to_string(reduce_op op) noexcept {
  switch (op) {
    case reduce_op::sum:
      return "sum";
    case reduce_op::product:
      return "product";
    case reduce_op::min:
      return "min";
    case reduce_op::max:
      return "max";
    case reduce_op::average:
      return "average";
  }
  return "unknown";
}

const char* to_string(ring_phase phase) noexcept {
  return phase == ring_phase::reduce_scatter ? "reduce-scatter" : "all-gather";
}

chunk chunk_of(size_t length, size_t parts, size_t c) noexcept {
  if (parts == 0)
    return {};
  size_t base = length / parts;
  size_t extra = length % parts;
  size_t begin = c * base + std::min(c, extra);
  return {begin, begin + base + (c < extra ? 1 : 0)};
}

ring_step ring_schedule(ring_phase phase, size_t rank, size_t ranks,
                        size_t step) noexcept {
  // Offsets taken mod `ranks` without going below zero.
  auto at = [ranks](size_t plus, size_t minus) {
    return (plus + ranks - minus % ranks) % ranks;
  };
  if (phase == ring_phase::reduce_scatter)
    return {phase, step, at(rank, step), at(rank, step + 1)};
  return {phase, step, at(rank + 1, step), at(rank, step)};
}

size_t ring_bytes_per_rank(size_t length, size_t elem_size, size_t ranks,
                           size_t rank) noexcept {
  size_t bytes = 0;
  for (auto phase : {ring_phase::reduce_scatter, ring_phase::all_gather})
    for (size_t s = 0; s + 1 < ranks; ++s)
      bytes +=
        chunk_of(length, ranks, ring_schedule(phase, rank, ranks, s).send_chunk)
          .size() *
        elem_size;
  return bytes;
}

} // namespace lumen::collective
