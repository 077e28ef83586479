#include "lumen/train/buckets.hpp"

#include <string>

#include <lumen/errors.hpp>

namespace lumen::train {

std::vector<bucket> plan_buckets(const std::vector<ml::param_range>& layers,
                                 const bucket_config& cfg) {
  if (cfg.first_bytes == 0 || cfg.cap_bytes == 0)
    throw usage_error("bucket_config: a bucket cap of 0 bytes; give each "
                      "cap a size (PyTorch's: 1 MiB first, 25 MiB then)");
  for (size_t l = 0; l < layers.size(); ++l)
    if (layers[l].begin != (l == 0 ? 0 : layers[l - 1].end) ||
        layers[l].end < layers[l].begin)
      throw usage_error("plan_buckets: layer " + std::to_string(l) +
                        " does not start where the one before ends; a "
                        "model's layers must tile its flat parameters");
  std::vector<bucket> out;
  for (size_t l = layers.size(); l-- > 0;) {
    auto cap = out.size() <= 1 ? cfg.first_bytes : cfg.cap_bytes;
    auto bytes = layers[l].size() * sizeof(float);
    if (!out.empty()) {
      auto& open = out.back();
      if ((open.params.size() * sizeof(float)) + bytes <= cap) {
        open.params.begin = layers[l].begin;
        open.first_layer = l;
        continue;
      }
    }
    out.push_back({layers[l], l, l});
  }
  return out;
}

} // namespace lumen::train
