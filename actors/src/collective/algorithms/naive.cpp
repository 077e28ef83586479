#include <cstring>

#include "collective/algorithms/algorithms.hpp"
#include "collective/reduce.hpp"

namespace lumen::collective::detail {

/// Gather to rank 0, reduce there, broadcast back: the baseline the ring
/// is measured against (rank 0 receives and sends N-1 whole buffers).
void naive_allreduce(transport& t, char* data, ml::dtype type, size_t numel,
                     reduce_op op) {
  int n = t.world(), r = t.rank();
  auto bytes = numel * ml::size_of(type);
  if (r != 0) {
    t.post(0, data, bytes);
    t.flush();
    t.recv(0, data, bytes, "allreduce");
    return;
  }
  auto& all = t.scratch(0, bytes * static_cast<size_t>(n));
  std::vector<const char*> bufs(static_cast<size_t>(n), data);
  for (int p = 1; p < n; ++p) {
    char* into = all.data() + static_cast<size_t>(p) * bytes;
    t.recv(p, into, bytes, "allreduce");
    bufs[static_cast<size_t>(p)] = into;
  }
  reduce_in_rank_order(bufs, data, type, numel, op);
  for (int p = 1; p < n; ++p)
    t.post(p, data, bytes);
  t.flush();
}

} // namespace lumen::collective::detail
