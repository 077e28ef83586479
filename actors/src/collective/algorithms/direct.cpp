#include <cstring>

#include "collective/algorithms/algorithms.hpp"
#include "collective/reduce.hpp"

// Direct: every member sends its buffer to every other and reduces all
// of them; the way for small buffers, whose steps are latency.

namespace lumen::collective::detail {

namespace {

/// Up to here a direct all-reduce's data leaves with its descriptor.
constexpr size_t direct_inline = 64 * 1024;

} // namespace

/// Every member sends its whole buffer to every other and reduces all N
/// in rank order: one step, N-1 times the bytes of the ring per rank.
void direct_allreduce(transport& t, const op_descriptor& d, char* data,
                      ml::dtype type, size_t numel, reduce_op op) {
  int n = t.world(), r = t.rank();
  auto bytes = numel * ml::size_of(type);
  if (bytes <= direct_inline && !t.agrees_by_doubling()) {
    t.start(d, true, {}, data, bytes); // the data leaves with the start
  } else {
    t.start(d, true);
    // Rank r writes to r+1, r+2, ... and reads from r-1, r-2, ...: the
    // k-th write of each rank meets the k-th read of its peer, so a buffer
    // too large for the sockets cannot leave two members waiting on each
    // other.
    for (int k = 1; k < n; ++k)
      t.post((r + k) % n, data, bytes);
  }
  auto& all = t.scratch(0, bytes * static_cast<size_t>(n));
  std::vector<const char*> bufs(static_cast<size_t>(n));
  for (int k = 1; k < n; ++k) {
    int p = (r - k + n) % n;
    char* into = all.data() + static_cast<size_t>(p) * bytes;
    t.recv(p, into, bytes, "allreduce");
    bufs[static_cast<size_t>(p)] = into;
  }
  t.flush(); // our buffer is out: it may change now
  auto& mine = t.scratch(1, bytes);
  if (bytes > 0)
    std::memcpy(mine.data(), data, bytes);
  bufs[static_cast<size_t>(r)] = mine.data();
  reduce_in_rank_order(bufs, data, type, numel, op);
}

} // namespace lumen::collective::detail
