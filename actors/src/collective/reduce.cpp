#include "collective/reduce.hpp"

#include <algorithm>

namespace lumen::collective::detail {

namespace {

/// out = last(fold of `bufs` with `f`), block by block, so that a block's
/// partial result stays in the cache while every buffer is added to it, and
/// each element is read from each buffer and written once: the first two
/// buffers are combined straight into `out` (which may be the first), the
/// division of an average is made with the last addition.
template <class T, class F, class Last>
void fold(const std::vector<const char*>& bufs, T* out, size_t numel, F f,
          Last last) {
  constexpr size_t block = 4096;
  auto in = [&](size_t q, size_t at) {
    return reinterpret_cast<const T*>(bufs[q]) + at;
  };
  auto n = bufs.size();
  for (size_t at = 0; at < numel; at += block) {
    auto m = std::min(block, numel - at);
    auto* acc = out + at;
    const T* a = in(0, at);
    if (n == 1)
      for (size_t i = 0; i < m; ++i)
        acc[i] = last(a[i]);
    for (size_t q = 1; q < n; ++q, a = acc) {
      const T* b = in(q, at);
      if (q + 1 == n)
        for (size_t i = 0; i < m; ++i)
          acc[i] = last(f(a[i], b[i]));
      else
        for (size_t i = 0; i < m; ++i)
          acc[i] = f(a[i], b[i]);
    }
  }
}

} // namespace

void reduce_in_rank_order(const std::vector<const char*>& bufs, char* out,
                          ml::dtype type, size_t numel, reduce_op op) {
  with_type(type, [&](auto e) {
    using T = decltype(e);
    auto* acc = reinterpret_cast<T*>(out);
    // finish()'s division, in the same words, so every path gets its bits.
    auto ranks = static_cast<T>(bufs.size());
    auto mean = [ranks](T x) { return static_cast<T>(x / ranks); };
    auto same = [](T x) { return x; };
    auto add = [](T x, T y) { return static_cast<T>(x + y); };
    switch (op) {
      case reduce_op::sum:
        return fold(bufs, acc, numel, add, same);
      case reduce_op::average:
        return fold(bufs, acc, numel, add, mean);
      case reduce_op::product:
        return fold(
          bufs, acc, numel, [](T x, T y) { return static_cast<T>(x * y); },
          same);
      case reduce_op::min:
        return fold(
          bufs, acc, numel, [](T x, T y) { return std::min(x, y); }, same);
      case reduce_op::max:
        return fold(
          bufs, acc, numel, [](T x, T y) { return std::max(x, y); }, same);
    }
  });
}

} // namespace lumen::collective::detail
