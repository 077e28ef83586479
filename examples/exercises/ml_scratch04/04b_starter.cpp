// ml_scratch04b: buckets all-reduced during backward — your file.
// Part 04a planned the buckets on paper; now three replicas are actors on
// nodes of their own (1 Gbit/s links), and each must average its gradient
// with the others' through the collective group "ddp" before its update:
// bucket by bucket, each bucket's all-reduce started as the backward pass
// finishes its last layer, so that the network works while backward
// computes. Write Replica::step's two TODOs. --check trains ten steps
// under three seeds (the weights against the mean gradient's step, the
// step's time against the backward pass's); --step shows one step, event
// by event.
//
//   lumen exercises check ml_scratch04b

#include "overlap.hpp"

namespace scratch04 {

// A replica of the model on its own node: each step, its gradient on its
// share of the batch, averaged with the others'.
class Replica {
public:
  Replica(int world_size, int rank)
    : r_(world_size, rank) {}

  // One step on this replica's share of batch k; returns its loss.
  float step(int k) {
    auto& plan = r_.plan();
    std::vector<lumen::ObjectRef<void>> pending(plan.size());
    auto left = r_.layers_in_buckets(); // layers of bucket b not done yet
    float loss = r_.backward(k, [&](size_t layer) {
      auto b = r_.bucket_of(layer);
      // TODO(ml_scratch04b): layer `layer` of bucket b is done. Once b has
      // no layer left (--left[b] == 0), start its all-reduce and go on:
      //   pending[b] = coll::allreduce_async(r_.bucket_gradient(b), "ddp",
      //                                      coll::reduce_op::average);
      (void)b;
    });
    // TODO(ml_scratch04b): the update needs every bucket's mean: for each
    // bucket, wait for its all-reduce (lumen::get(pending[b])) and put the
    // mean back into the gradient (r_.take_mean(b)).
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
