// ml_scratch03a: the ring's chunk schedule — your file.
// Every rank starts with a buffer of its own; at the end every rank must
// hold their element-wise sum. Fill in the two loops below (the TODOs),
// then run with --step to watch the chunks move and --check for a verdict.
// README.md has the picture.
//
//   lumen exercises check ml_scratch03a

#include "harness.hpp"

namespace scratch03 {

// Reduce-scatter: after N-1 steps, rank r holds chunk (r + 1) mod N summed
// over all ranks.
void reduce_scatter(ring_net& net) {
  const size_t n = net.ranks();
  for (size_t s = 0; s + 1 < n; ++s) {
    for (size_t r = 0; r < n; ++r)
      // TODO(ml_scratch03a): which chunk does rank r send at step s? At step
      // 0 it is its own chunk r; after that, the one it added to last.
      net.send(r, 0);
    auto got = net.end_step("reduce-scatter");
    for (size_t r = 0; r < n; ++r) {
      // TODO(ml_scratch03a): add got[r].values into rank r's own copy of
      // chunk got[r].chunk_index (net.chunk_at gives its elements, and
      // net.buffer(r) the rank's buffer).
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
      // TODO(ml_scratch03a): which chunk does rank r send at step s? At step
      // 0 it is the one it finished in reduce-scatter, chunk r + 1.
      net.send(r, 0);
    auto got = net.end_step("all-gather");
    for (size_t r = 0; r < n; ++r) {
      // TODO(ml_scratch03a): copy got[r].values over rank r's chunk
      // got[r].chunk_index.
    }
    net.show();
  }
}

} // namespace scratch03

int main(int argc, char** argv) {
  return scratch03::main_of(argc, argv);
}
