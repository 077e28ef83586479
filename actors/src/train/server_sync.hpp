#pragma once

// A synchronous step the parameter server's way, for `lumen train --sync
// ps`: rank 0 is the server. Every other rank sends it its gradient (its
// loss with it), rank 0 averages them with its own, takes the optimizer's
// step and sends every rank the new weights. The server's link carries
// (N-1)·S in and (N-1)·S out a step, where a ring member's carries
// 2·S·(N-1)/N: what tests/bench/ps_vs_ring measures, here for the same
// model and data as the ring.

#include <string>
#include <vector>

#include "lumen/ml/optimizer.hpp"

namespace lumen::train::detail {

class server_sync {
public:
  server_sync(std::string group, size_t rank, size_t world, size_t params);

  /// This rank's `grad` and `loss` in; the new weights in `w` after, on
  /// every rank. Returns the mean loss. Throws `error` on every rank, naming
  /// `where`, if the mean gradient or loss is not finite (no step is taken).
  float step(std::vector<float>& w, std::vector<float>& grad, float loss,
             ml::optimizer& opt, float lr_scale, const std::string& where);

  /// Seconds the last step took from its gradient to its weights.
  double exposed() const noexcept {
    return exposed_;
  }

private:
  std::string group_;
  size_t rank_, world_;
  std::vector<float> part_; // a worker's gradient and loss, as received
  double exposed_ = 0;
};

} // namespace lumen::train::detail
