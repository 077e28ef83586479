#include <cstring>

#include "collective/algorithms/algorithms.hpp"
#include "collective/reduce.hpp"

namespace lumen::collective::detail {

/// Recursive doubling: log2 N rounds, rank r and rank r XOR 2^k swap
/// their partial results in round k and both reduce them, the lower
/// rank's first, so that both get the same bits; the rounds carry the
/// start's agreement too, so a small all-reduce costs log2 N latencies
/// and sends S·log2 N bytes per rank. The buffer changes only once all
/// agreed.
void doubling_allreduce(transport& t, const op_descriptor& d, char* data,
                        ml::dtype type, size_t numel, reduce_op op) {
  auto bytes = numel * ml::size_of(type);
  auto& acc = t.scratch(1, bytes);
  if (bytes > 0)
    std::memcpy(acc.data(), data, bytes);
  transport::doubling_data rounds;
  rounds.send = [&] { return std::make_pair(acc.data(), bytes); };
  rounds.take = [&](int partner, uint64_t n, bool agreed) {
    auto& in = t.scratch(0, n);
    t.recv(partner, in.data(), n, "allreduce");
    if (!agreed || n != bytes || bytes == 0)
      return;
    with_type(type, [&](auto x) {
      using T = decltype(x);
      auto mine = reinterpret_cast<T*>(acc.data());
      auto theirs = reinterpret_cast<T*>(in.data());
      if (t.rank() < partner) {
        reduce_into(mine, theirs, numel, op);
      } else {
        reduce_into(theirs, mine, numel, op);
        std::memcpy(mine, theirs, bytes);
      }
    });
  };
  t.agree_by_doubling(d, true, {}, &rounds);
  if (bytes > 0)
    std::memcpy(data, acc.data(), bytes);
  with_type(type, [&](auto x) {
    using T = decltype(x);
    finish(reinterpret_cast<T*>(data), numel, op,
           static_cast<size_t>(t.world()));
  });
}

} // namespace lumen::collective::detail
