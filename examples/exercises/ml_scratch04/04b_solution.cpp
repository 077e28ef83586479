// ml_scratch04b: buckets all-reduced during backward — the reference:
// 04b_starter.cpp with its TODOs done.

#include "overlap.hpp"

namespace scratch04 {

// A replica of the model on its own node: each step, its gradient on its
// share of the batch, averaged with the others' bucket by bucket while
// its backward pass goes on.
class Replica {
public:
  Replica(int world_size, int rank)
    : r_(world_size, rank) {}

  // One step on this replica's share of batch k; returns its loss.
  float step(int k) {
    auto& plan = r_.plan();
    std::vector<lumen::ObjectRef<void>> pending(plan.size());
    auto left = r_.layers_in_buckets();
    float loss = r_.backward(k, [&](size_t layer) {
      auto b = r_.bucket_of(layer);
      // The bucket's last layer is done: its all-reduce runs on the
      // member's lane while backward computes the layers before it.
      if (--left[b] == 0)
        pending[b] = coll::allreduce_async(r_.bucket_gradient(b), "ddp",
                                           coll::reduce_op::average);
    });
    // Only the update needs the mean: wait here, not in the pass.
    for (size_t b = 0; b < plan.size(); ++b) {
      lumen::get(pending[b]);
      r_.take_mean(b);
    }
    r_.update();
    return loss;
  }

  std::vector<float> weights() {
    return r_.weights();
  }

private:
  replica r_;
};

} // namespace scratch04

LUMEN_ACTOR(scratch04::Replica, &scratch04::Replica::step,
            &scratch04::Replica::weights);
LUMEN_ACTOR_CTOR(scratch04::Replica(int, int));

int main(int argc, char** argv) {
  return scratch04::main_overlap<scratch04::Replica>(argc, argv);
}
