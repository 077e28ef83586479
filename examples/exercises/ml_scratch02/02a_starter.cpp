// ml_scratch02a: the server's rules, sync, backup and async — your file.
// Four workers, one three times slower, push gradients to a server. In
// sync mode the server waits for a step's gradients and applies their
// mean; with backup workers it stops waiting for the slowest; in async
// mode it applies each gradient when it comes. Fill in the server's two
// rules below (the TODOs), then run to compare the modes side by side,
// with --step to watch each update and --check for a verdict. README.md
// has the picture.
//
//   lumen exercises check ml_scratch02a    (run: --plot=FILE)

#include <algorithm>

#include "harness.hpp"

namespace scratch02 {

// Async: `grad` was computed on the weights of `version`; the server is
// at s.version now.
void on_async_gradient(server& s, uint64_t version, std::vector<float> grad) {
  // TODO(ml_scratch02a): the staleness is s.version - version: count it in
  // s.staleness; if s.clip_norm > 0, clip grad to that global norm
  // (ml::clip_by_global_norm); if s.staleness_aware, divide the rate by
  // the staleness (when it is above 1).
  (void)version;
  for (size_t i = 0; i < s.weights.size(); ++i)
    s.weights[i] -= s.lr * grad[i];
  ++s.version;
}

// Sync: a gradient of the open step; true if it closes the step.
bool on_sync_gradient(server& s, const std::vector<float>& grad) {
  for (size_t i = 0; i < grad.size(); ++i)
    s.sum[i] += grad[i];
  // TODO(ml_scratch02a): with backup workers the step closes once
  // s.workers - s.backup gradients are in, not all s.workers.
  if (++s.received < s.workers)
    return false;
  for (size_t i = 0; i < s.weights.size(); ++i)
    s.weights[i] -= s.lr * s.sum[i] / static_cast<float>(s.received);
  std::fill(s.sum.begin(), s.sum.end(), 0.0f);
  s.received = 0;
  ++s.version;
  return true;
}

} // namespace scratch02

int main(int argc, char** argv) {
  return scratch02::main_of(argc, argv);
}
