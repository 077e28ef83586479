#pragma once

// The element-wise work the algorithms share, for every dtype.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lumen/collective/collective.hpp"
#include "lumen/collective/ring.hpp"

namespace lumen::collective::detail {

/// Dispatches on a dtype to `fn(T{})`.
template <class F>
void with_type(ml::dtype t, F&& fn) {
  switch (t) {
    case ml::dtype::float32:
      return fn(float{});
    case ml::dtype::float64:
      return fn(double{});
    case ml::dtype::int32:
      return fn(int32_t{});
    case ml::dtype::int64:
      return fn(int64_t{});
  }
}

/// Reduces the `n` buffers at `bufs` (rank order) into `out`, so that every
/// member that reduces them gets the same bits.
void reduce_in_rank_order(const std::vector<const char*>& bufs, char* out,
                          ml::dtype type, size_t numel, reduce_op op);

} // namespace lumen::collective::detail
