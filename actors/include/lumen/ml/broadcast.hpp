#pragma once

// What a sync server sends its workers when a step closes: the full
// weights, or, with a compressed broadcast (ps_config::broadcast), the
// change since the replica every worker holds, in fp16 or int8. The server
// keeps a copy of that replica, made by the same additions as the
// workers', so that the change it sends is measured against what they
// really hold: one step's rounding is made good by the next, and the
// drift (the largest difference between a replica and the server's
// weights) stays within one step's rounding. Every `rebroadcast_every`
// versions the full weights go out and the drift is 0.
//
//   server:  auto u = caster.next(version, weights);     // to every pusher
//   worker:  if (!apply_update(u, replica, n, held_version, scratch))
//              pull();  // a change for a replica it does not hold
//
// Plain C++ over the tensor and codec types: tests, exercises and the
// browser playground use it alike.

#include <cstdint>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "lumen/ml/compress.hpp"
#include "lumen/ml/tensor.hpp"
#include "lumen/ml/wire.hpp"

namespace lumen::ml {

/// A step's weights as a sync server answers a worker's push.
struct weights_update {
  uint64_t version = 0; // the weights' version after the update
  bool full = true;     // the weights themselves, or a change
  uint64_t base = 0;    // a change: the version of the replica it is for
  tensor weights;       // full: the weights
  compressed change;    // a change: the weights − that replica, compressed

  /// Bytes of numbers it carries.
  size_t payload_bytes() const noexcept {
    return full ? weights.nbytes() : change.bytes.size();
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, weights_update& x) {
  return f(caf::meta::type_name("lumen::ml::weights_update"), x.version, x.full,
           x.base, x.weights, x.change);
}

/// The server's side: makes each step's update and keeps the replica.
class broadcaster {
public:
  /// `kind` none sends the full weights every time.
  broadcaster(codec kind, uint64_t rebroadcast_every);

  /// The update for `weights` (float32) at `version`: the full weights
  /// for the first, at each multiple of `rebroadcast_every`, and whenever
  /// a change would not fit the codec; else the change since the last.
  weights_update next(uint64_t version, const tensor& weights);

  /// After the last update: the largest |replica − weights|.
  float drift() const noexcept {
    return drift_;
  }

  /// The largest drift so far.
  float max_drift() const noexcept {
    return max_drift_;
  }

private:
  codec kind_;
  uint64_t every_;
  bool held_ = false; // replica_ holds the last update's weights
  uint64_t held_version_ = 0;
  uint64_t full_version_ = 0;
  std::vector<float> replica_;
  std::vector<float> change_;
  float drift_ = 0;
  float max_drift_ = 0;
};

/// The worker's side: applies `u` to the `n` floats of `replica`, which
/// hold version `held`. False, and `replica` unchanged, for a change made
/// for another version (the worker pulls the weights then). Throws
/// `usage_error` for an update of another size or a damaged change.
bool apply_update(const weights_update& u, float* replica, size_t n,
                  uint64_t held, std::vector<float>& scratch);

} // namespace lumen::ml
