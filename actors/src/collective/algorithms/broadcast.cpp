#include <algorithm>

#include "collective/algorithms/algorithms.hpp"
#include "collective/algorithms/ring.hpp"

namespace lumen::collective::detail {

void run_broadcast(transport& t, char* data, ml::dtype type, size_t numel,
                   int src) {
  auto d = describe(operation_kind::broadcast, type, numel);
  d.root = src;
  t.start(d, false, root_problem(t, src, "broadcast"));
  // A chain from the source round the ring, in segments, each rank
  // passing a segment on as soon as it has it.
  int n = t.world(), r = t.rank();
  int right = (r + 1) % n, left = (r + n - 1) % n;
  auto elem = ml::size_of(type);
  auto seg = std::max<size_t>(1, segment_bytes / elem);
  for (size_t b = 0; b < numel; b += seg) {
    auto e = std::min(numel, b + seg);
    if (r != src)
      t.recv(left, data + b * elem, (e - b) * elem, "broadcast");
    if (right != src)
      t.post(right, data + b * elem, (e - b) * elem);
  }
  t.flush();
}

void run_barrier(transport& t) {
  // Nobody gets past `start` before every member's descriptor came.
  t.start(describe(operation_kind::barrier, ml::dtype::float32, 0), false);
}

} // namespace lumen::collective::detail
