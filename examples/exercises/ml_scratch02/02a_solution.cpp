// ml_scratch02a: the server's rules — the reference: 02a_starter.cpp
// with its TODOs done.

#include <algorithm>

#include "harness.hpp"

namespace scratch02 {

// Async: applied on arrival. Staleness is how many updates came since the
// gradient's weights were pulled; a stale gradient points where the
// weights were, so it gets a smaller step (the rate divided by the
// staleness), and clipping bounds how far any one gradient can move them.
void on_async_gradient(server& s, uint64_t version, std::vector<float> grad) {
  auto staleness = s.version - version;
  ++s.staleness[staleness];
  if (s.clip_norm > 0)
    ml::clip_by_global_norm(grad.data(), grad.size(), s.clip_norm);
  float rate = s.lr;
  if (s.staleness_aware && staleness > 1)
    rate /= static_cast<float>(staleness);
  for (size_t i = 0; i < s.weights.size(); ++i)
    s.weights[i] -= rate * grad[i];
  ++s.version;
}

// Sync: the step closes once `workers - backup` gradients are in; the
// weights move against their mean, and the next step starts empty.
bool on_sync_gradient(server& s, const std::vector<float>& grad) {
  for (size_t i = 0; i < grad.size(); ++i)
    s.sum[i] += grad[i];
  if (++s.received < s.workers - s.backup)
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
