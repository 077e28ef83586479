#pragma once

// Gradient buckets, as PyTorch's DistributedDataParallel makes them: the
// layers taken in the order the backward pass finishes them (the last
// layer first), fused into buckets of at most `cap_bytes`, the first one
// smaller (`first_bytes`) so that its all-reduce starts early. A layer is
// never split; one larger than the cap is a bucket of its own. Each
// bucket is one contiguous range of the flat parameters, since a model
// lays its layers out in order.
//
//   auto plan = lumen::train::plan_buckets(net.layers(), {});
//   // plan[0] holds the last layers, plan.back() the first.
//
// Plain C++: tests, the exercise and the browser playground use it alike.

#include <cstddef>
#include <vector>

#include "lumen/ml/models.hpp"

namespace lumen::train {

struct bucket_config {
  size_t first_bytes = size_t{64} << 10; // PyTorch: 1 MiB, for larger models
  size_t cap_bytes = size_t{256} << 10;  // PyTorch: 25 MiB
  // Off, every bucket's all-reduce waits for the end of the backward pass:
  // the reference a measure of the overlap compares with.
  bool overlap = true;
};

/// A bucket: parameters `params` (floats), made of layers
/// `[first_layer, last_layer]` of the model's forward order.
struct bucket {
  ml::param_range params;
  size_t first_layer = 0;
  size_t last_layer = 0;
};

/// The buckets of a model whose layers (forward order, contiguous, as
/// model::layers() gives them) are `layers`, in the order their gradients
/// are ready. Throws `usage_error` for layers that do not tile one flat
/// vector, or caps of 0.
std::vector<bucket> plan_buckets(const std::vector<ml::param_range>& layers,
                                 const bucket_config& cfg);

} // namespace lumen::train
