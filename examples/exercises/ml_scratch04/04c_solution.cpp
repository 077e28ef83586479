// ml_scratch04c: one model, kept one — the reference: 04c_starter.cpp with
// its TODOs done.

#include "drift.hpp"

namespace scratch04 {

// A replica whose gradient is all-reduced whole each step (04b did it in
// buckets), on a cluster where replicas drift apart.
class Replica {
public:
  Replica(int world_size, int rank)
    : r_(world_size, rank, faults::drifting) {
    // One seed for every replica: the same weights from the start.
    r_.weights() = model().init(1);
  }

  float step(int k) {
    float loss = r_.backward(k, [](size_t) {});
    coll::allreduce(r_.gradient(), "ddp", coll::reduce_op::average);
    r_.update();
    // Equal gradients do not keep replicas equal (rounding, a flipped
    // bit): every tenth step, rank 0's weights overwrite the others'.
    if (k % 10 == 9)
      coll::broadcast(r_.weights(), 0, "ddp");
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
  return scratch04::main_drift<scratch04::Replica>(argc, argv);
}
