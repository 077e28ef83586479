// ml_scratch04a: the bucket plan, by hand — the reference solution.
// N replicas of one model, each on its share of every batch, must take the
// same step: their gradients averaged, bucket by bucket, each bucket's
// all-reduce started the moment the backward pass is done with it. See
// README.md for the picture.
//
//   lumen exercises check ml_scratch04a

#include "harness.hpp"

namespace scratch04 {

// The layers in the order backward finishes them (the last first), fused
// into buckets of at most cap_bytes (the first at most first_bytes); a
// layer is never split, so one larger than the cap is a bucket alone.
std::vector<bucket> plan_buckets(const std::vector<param_range>& layers,
                                 size_t first_bytes, size_t cap_bytes) {
  std::vector<bucket> plan;
  for (size_t l = layers.size(); l-- > 0;) {
    auto cap = plan.size() <= 1 ? first_bytes : cap_bytes;
    auto bytes = layers[l].size() * sizeof(float);
    if (!plan.empty() &&
        plan.back().params.size() * sizeof(float) + bytes <= cap) {
      plan.back().params.begin = layers[l].begin; // layers lie in order
      plan.back().first_layer = l;
      continue;
    }
    plan.push_back({layers[l], l, l});
  }
  return plan;
}

// A layer's gradient is done: once its bucket has no layer left, the
// bucket's all-reduce starts, while backward goes on with the layers
// before it.
void on_layer_ready(ddp_step& step, size_t layer) {
  auto b = step.bucket_of(layer);
  if (b < step.plan().size() && --step.layers_left[b] == 0)
    step.start_allreduce(b);
}

// What an all-reduce with `average` leaves in every replica's range: the
// same mean, computed once, so that every replica holds the same bits.
void average(std::vector<std::vector<float>>& grads, param_range range) {
  for (auto i = range.begin; i < range.end; ++i) {
    float sum = 0;
    for (auto& g : grads)
      sum += g[i];
    for (auto& g : grads)
      g[i] = sum / float(grads.size());
  }
}

// Rank 0's weights to every replica: whatever drifted is put right.
void rebroadcast(std::vector<std::vector<float>>& params) {
  for (auto& p : params)
    p = params[0];
}

} // namespace scratch04

int main(int argc, char** argv) {
  return scratch04::main_of(argc, argv);
}
