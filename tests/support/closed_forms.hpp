#pragma once

// Rank-unique inputs whose sum, product, min, max and average over N ranks
// are known in closed form, for the collective suites and their member
// processes: rank r's element i is (r+1)·(i mod 3 + 1).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <lumen/ml.hpp>

namespace lumen::test {

using lumen::collective::reduce_op;

inline float input(int r, size_t i) {
  return static_cast<float>((r + 1) * static_cast<int>(i % 3 + 1));
}

inline float expected(reduce_op op, int n, size_t i) {
  float acc = input(0, i);
  for (int r = 1; r < n; ++r) {
    float x = input(r, i);
    if (op == reduce_op::sum || op == reduce_op::average)
      acc += x;
    else if (op == reduce_op::product)
      acc *= x;
    else if (op == reduce_op::min)
      acc = std::min(acc, x);
    else
      acc = std::max(acc, x);
  }
  return op == reduce_op::average ? acc / static_cast<float>(n) : acc;
}

inline lumen::ml::tensor rank_input(int r, size_t length) {
  lumen::ml::tensor t({static_cast<int64_t>(length)});
  for (size_t i = 0; i < length; ++i)
    t.data<float>()[i] = input(r, i);
  return t;
}

/// Whether `t` is the reduction of every rank's input over `n` ranks.
inline bool matches(const lumen::ml::tensor& t, reduce_op op, int n) {
  for (size_t i = 0; i < t.numel(); ++i)
    if (t.data<float>()[i] != expected(op, n, i))
      return false;
  return true;
}

} // namespace lumen::test
