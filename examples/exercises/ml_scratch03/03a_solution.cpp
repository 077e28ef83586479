// ml_scratch03a: the ring's chunk schedule — the reference solution.
// Every rank starts with a buffer of its own; at the end every rank holds
// their element-wise sum. See README.md for the picture.

#include "harness.hpp"

namespace scratch03 {

// Reduce-scatter: after N-1 steps, rank r holds chunk (r + 1) mod N summed
// over all ranks.
void reduce_scatter(ring_net& net) {
  const size_t n = net.ranks();
  for (size_t s = 0; s + 1 < n; ++s) {
    for (size_t r = 0; r < n; ++r)
      // At step s, rank r passes on the chunk it finished adding to in the
      // step before (its own chunk r at step 0).
      net.send(r, (r + n - s % n) % n);
    auto got = net.end_step("reduce-scatter");
    for (size_t r = 0; r < n; ++r) {
      // Add what arrived into this rank's own copy of that chunk.
      auto ch = net.chunk_at(got[r].chunk_index);
      auto& buf = net.buffer(r);
      for (size_t i = ch.begin; i < ch.end; ++i)
        buf[i] += got[r].values[i - ch.begin];
    }
    net.show();
  }
}

// All-gather: the finished chunks travel once more around the ring, each
// rank copying what arrives over its own.
void all_gather(ring_net& net) {
  const size_t n = net.ranks();
  for (size_t s = 0; s + 1 < n; ++s) {
    for (size_t r = 0; r < n; ++r)
      // Rank r owns chunk r+1 when this phase starts, and passes on what
      // it received in the step before.
      net.send(r, (r + 1 + n - s % n) % n);
    auto got = net.end_step("all-gather");
    for (size_t r = 0; r < n; ++r) {
      auto ch = net.chunk_at(got[r].chunk_index);
      auto& buf = net.buffer(r);
      for (size_t i = ch.begin; i < ch.end; ++i)
        buf[i] = got[r].values[i - ch.begin];
    }
    net.show();
  }
}

} // namespace scratch03

int main(int argc, char** argv) {
  return scratch03::main_of(argc, argv);
}
