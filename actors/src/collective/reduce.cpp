#include "collective/reduce.hpp"

#include <algorithm>
#include <cstring>

namespace lumen::collective::detail {

void reduce_in_rank_order(const std::vector<const char*>& bufs, char* out,
                          ml::dtype type, size_t numel, reduce_op op) {
  with_type(type, [&](auto e) {
    using T = decltype(e);
    // Block by block, so that a block's partial result stays in the
    // cache while every buffer is added to it: one pass over memory.
    constexpr size_t block = 4096;
    auto acc = reinterpret_cast<T*>(out);
    for (size_t at = 0; at < numel; at += block) {
      auto n = std::min(block, numel - at);
      auto first = reinterpret_cast<const T*>(bufs[0]) + at;
      if (first != acc + at)
        std::memmove(acc + at, first, n * sizeof(T));
      for (size_t q = 1; q < bufs.size(); ++q)
        reduce_into(acc + at, reinterpret_cast<const T*>(bufs[q]) + at, n, op);
      finish(acc + at, n, op, bufs.size());
    }
  });
}

} // namespace lumen::collective::detail
