#pragma once

// One replica's side of data-parallel training over a collective group:
// each member computes the gradient of its own batch, and the group's
// mean gradient is made bucket by bucket while the backward pass goes on.
// When the pass finishes a bucket's last layer, that bucket's all-reduce
// starts in place (allreduce_start) and the pass goes on with the layers
// before it, moving the started all-reduces on between layers; after the
// pass the member waits for what is still under way. Every member ends with the
// same mean to the bit, so replicas that start alike and step alike stay alike;
// `drift` checks that and `rebroadcast` puts it right.
//
//   lumen::collective::init_group(world, rank, "ddp");
//   lumen::train::bucketed_allreduce sync{net, "ddp"};
//   float loss = sync.loss_and_mean_gradient(params.data(), batch,
//   grad.data()); opt.step(params.data(), grad.data(), grad.size()); if (step %
//   100 == 0) lumen::train::rebroadcast(params, "ddp");

#include <string>
#include <vector>

#include <lumen/object_ref.hpp>

#include "lumen/collective/collective.hpp"
#include "lumen/ml/data.hpp"
#include "lumen/ml/models.hpp"
#include "lumen/train/buckets.hpp"

namespace lumen::train {

/// Where a step's time went, in seconds from its start.
struct step_timeline {
  double backward_end = 0;      // the forward and backward passes done
  double end = 0;               // the last all-reduce waited for
  std::vector<double> started;  // each bucket's all-reduce asked for
  std::vector<double> finished; // and seen done (between layers, or
                                // once the pass ended)

  /// The time spent waiting for all-reduces after the backward pass.
  double exposed() const noexcept {
    return end - backward_end;
  }
};

class bucketed_allreduce {
public:
  /// For this thread's membership of `group` (init_group first), training
  /// `net`, which must outlive it. Throws `usage_error` for a bad config.
  bucketed_allreduce(const ml::model& net, std::string group,
                     bucket_config cfg = {});

  /// The loss of `batch` at `params`; `grad` (num_params floats) becomes
  /// the mean over the group's members of their batches' gradients.
  /// Throws collective_error if a member fails or does not come.
  float loss_and_mean_gradient(const float* params, const ml::dataset& batch,
                               float* grad);

  const std::vector<bucket>& buckets() const noexcept {
    return buckets_;
  }

  const step_timeline& last_step() const noexcept {
    return timeline_;
  }

private:
  const ml::model& net_;
  std::string group_;
  bool overlap_;
  std::vector<bucket> buckets_;
  std::vector<size_t> bucket_of_;   // by layer
  bool alone_;                      // a group of one: nothing to all-reduce
  std::vector<size_t> layers_left_; // by bucket, this step
  // Where the pass writes this member's gradient: the all-reduces read it
  // there (in the members' shared memory, if they share a machine). Two,
  // step by step in turn, so that a member writes its next gradient while
  // a slower member still reads its last: one meeting a step, not two.
  collective::allreduce_buffer own_grad_[2];
  size_t steps_ = 0;
  std::vector<collective::started_allreduce> running_;
  step_timeline timeline_;
};

/// Makes every member's `params` rank `root`'s: the periodic re-broadcast
/// that ends any drift.
void rebroadcast(std::vector<float>& params, const std::string& group,
                 int root = 0);

/// The largest difference between any two members' `params` (each member
/// gets the same figure): 0 while the replicas are identical.
float drift(const std::vector<float>& params, const std::string& group);

} // namespace lumen::train
