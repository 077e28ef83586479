// ml_scratch04a: the bucket plan, by hand — your file.
// N replicas of one model, each on its share of every batch, must take the
// same step: their gradients averaged, bucket by bucket, each bucket's
// all-reduce started the moment the backward pass is done with it. Fill in
// the four functions below (the TODOs), then run with --step to watch the
// buckets against the backward pass and --check for a verdict. README.md
// has the picture.
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
  // TODO(ml_scratch04a): walk the layers from the last to the first; add
  // each to the open bucket while it fits (plan.back().params grows down to
  // layers[l].begin, first_layer becomes l), else open a new bucket
  // {layers[l], l, l}. The first bucket's cap is first_bytes.
  static_cast<void>(layers);
  static_cast<void>(first_bytes);
  static_cast<void>(cap_bytes);
  return plan;
}

// A layer's gradient is done (step.bucket_of(layer) is its bucket).
void on_layer_ready(ddp_step& step, size_t layer) {
  // TODO(ml_scratch04a): count the layer off its bucket's
  // step.layers_left; when none is left, step.start_allreduce(bucket).
  static_cast<void>(step);
  static_cast<void>(layer);
}

// An all-reduce with `average`: every replica's gradient in `range`
// becomes the mean over the replicas.
void average(std::vector<std::vector<float>>& grads, param_range range) {
  // TODO(ml_scratch04a): for each i in [range.begin, range.end), sum the
  // replicas' grads[r][i] and write the same mean into every one.
  static_cast<void>(grads);
  static_cast<void>(range);
}

// Every replica takes rank 0's weights.
void rebroadcast(std::vector<std::vector<float>>& params) {
  // TODO(ml_scratch04a): copy params[0] over every other replica's.
  static_cast<void>(params);
}

} // namespace scratch04

int main(int argc, char** argv) {
  return scratch04::main_of(argc, argv);
}
