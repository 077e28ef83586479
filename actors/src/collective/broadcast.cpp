#include "lumen/ml/broadcast.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include <Eigen/Core>

#include <lumen/errors.hpp>

namespace lumen::ml {

namespace {

using vec = Eigen::Map<Eigen::VectorXf>;
using const_vec = Eigen::Map<const Eigen::VectorXf>;

Eigen::Index len(size_t n) {
  return static_cast<Eigen::Index>(n);
}

} // namespace

broadcaster::broadcaster(codec kind, uint64_t rebroadcast_every)
  : kind_(kind)
  , every_(rebroadcast_every) {}

weights_update broadcaster::next(uint64_t version, const tensor& weights) {
  weights_update u;
  u.version = version;
  auto n = weights.numel();
  auto w = weights.data<float>();
  // Due once a multiple of `every_` is reached (or passed: a version the
  // broadcaster did not see).
  bool due = every_ > 0 && version / every_ != full_version_ / every_;
  if (kind_ != codec::none && held_ && !due && replica_.size() == n) {
    change_.resize(n);
    vec(change_.data(), len(n)) =
      const_vec(w, len(n)) - const_vec(replica_.data(), len(n));
    try {
      u.change = compress(change_.data(), n, kind_);
      u.full = false;
      u.base = held_version_;
    } catch (const usage_error&) {
      // A change beyond fp16's range: this step goes out in full.
    }
  }
  if (u.full) {
    u.weights = weights;
    full_version_ = version;
    drift_ = 0;
    if (kind_ != codec::none)
      replica_.assign(w, w + n);
  } else {
    // What the workers add, added here the same way.
    decompress(u.change, change_.data(), n);
    vec r(replica_.data(), len(n));
    r += const_vec(change_.data(), len(n));
    drift_ = (r - const_vec(w, len(n))).cwiseAbs().maxCoeff();
  }
  held_ = kind_ != codec::none;
  held_version_ = version;
  max_drift_ = std::max(max_drift_, drift_);
  return u;
}

bool apply_update(const weights_update& u, float* replica, size_t n,
                  uint64_t held, std::vector<float>& scratch) {
  if (u.full) {
    if (u.weights.type() != dtype::float32 || u.weights.numel() != n)
      throw usage_error("weights " + u.weights.describe() +
                        " for a replica of " + std::to_string(n) +
                        " float32 parameters: a server of another model");
    std::memcpy(replica, u.weights.data<float>(), n * sizeof(float));
    return true;
  }
  if (u.base != held)
    return false;
  scratch.resize(n);
  decompress(u.change, scratch.data(), n);
  vec(replica, len(n)) += const_vec(scratch.data(), len(n));
  return true;
}

} // namespace lumen::ml
