#include "train/server_sync.hpp"

#include <chrono>
#include <cmath>
#include <limits>

#include "lumen/collective/collective.hpp"
#include "lumen/errors.hpp"
#include "lumen/ml/data.hpp"

#include "train/loop_checks.hpp"

namespace lumen::train::detail {

server_sync::server_sync(std::string group, size_t rank, size_t world,
                         size_t params)
  : group_(std::move(group))
  , rank_(rank)
  , world_(world)
  , part_(params + 1) {}

float server_sync::step(std::vector<float>& w, std::vector<float>& grad,
                        float loss, ml::optimizer& opt, float lr_scale,
                        const std::string& where) {
  auto start = std::chrono::steady_clock::now();
  auto n = grad.size();
  // The loss travels as one more value after the gradient, and back after
  // the weights: NaN there tells the workers the step diverged.
  grad.push_back(loss);
  float mean_loss = 0;
  if (rank_ == 0) {
    for (size_t r = 1; r < world_; ++r) {
      collective::recv(part_, int(r), group_);
      for (size_t i = 0; i <= n; ++i)
        grad[i] += part_[i];
    }
    for (auto& g : grad)
      g /= float(world_);
    mean_loss = grad.back();
    grad.pop_back();
    bool finite =
      std::isfinite(mean_loss) && ml::first_non_finite(grad.data(), n) == n;
    if (finite)
      opt.step(w.data(), grad.data(), n, lr_scale);
    w.push_back(finite ? mean_loss : std::numeric_limits<float>::quiet_NaN());
    for (size_t r = 1; r < world_; ++r)
      collective::send(w, int(r), group_);
    w.pop_back();
    if (!finite)
      stop_if_diverged(mean_loss, grad, where);
  } else {
    collective::send(grad, 0, group_);
    grad.pop_back();
    w.push_back(0);
    collective::recv(w, 0, group_);
    mean_loss = w.back();
    w.pop_back();
    if (!std::isfinite(mean_loss))
      throw error("training diverged at " + where +
                  ": the server's mean gradient or loss is not finite; "
                  "lower the learning rate (--lr)");
  }
  exposed_ =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
  return mean_loss;
}

} // namespace lumen::train::detail
