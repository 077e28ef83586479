#pragma once

// Part 04b's checks: the learner's replicas (an actor with `step(k)`
// returning its loss and `weights()`) train on the simulated cluster of
// replicas.hpp. After a step every replica must hold the weights of the
// mean gradient's step; the step must hide most of its all-reduce behind
// the backward pass (all but the bucket of the first layer, which
// backward finishes last); ten steps lower the loss.

#include "replicas.hpp"

namespace scratch04 {

/// Ten steps of the learner's replicas under `seed`: "" or what is wrong.
/// With `table`, a line a step: the loss, the step's time against the
/// backward pass's and the all-reduce's.
template <class Replica>
std::string check_overlap(uint64_t seed, bool table) {
  static const auto want = expected_weights(10);
  return exercise::in_simulation(replica_network(seed), [&]() -> std::string {
    auto replicas = start_replicas<Replica>();
    weights_of(replicas); // every replica in the group before the timing
    // What no schedule hides: the first layer's bucket, done last.
    auto plan =
      lumen::train::plan_buckets(model().layers(), {64 << 10, 512 << 10});
    const double backward = backward_seconds(),
                 allreduce = allreduce_seconds(model().num_params()),
                 last = allreduce_seconds(plan.back().params.size());
    if (table)
      std::printf("  seed %llu: step  loss     step ms  backward ms  "
                  "all-reduce ms  hidden (at most %.0f%%)\n",
                  static_cast<unsigned long long>(seed),
                  100 * (1 - last / allreduce));
    float first_loss = 0, loss = 0;
    for (int k = 0; k < 10; ++k) {
      auto began = lumen::sim::now();
      loss = step_all(replicas, k).front();
      if (k == 0)
        first_loss = loss;
      // The step's time on the replicas: the calls' own messages take a
      // latency each way.
      double took =
        std::chrono::duration<double>(lumen::sim::now() - began).count() -
        2 * latency;
      double exposed = took - backward;
      if (table)
        std::printf("          %5d  %.4f %8.2f %12.2f %14.2f %6.0f%%\n", k,
                    static_cast<double>(loss), took * 1e3, backward * 1e3,
                    allreduce * 1e3,
                    100 * std::max(0.0, 1 - exposed / allreduce));
      auto w = weights_of(replicas);
      for (int r = 0; r < world; ++r) {
        auto gap = relative_gap(w[size_t(r)], want[size_t(k)]);
        if (gap > 1e-4)
          return "after step " + std::to_string(k) + " replica " +
                 std::to_string(r) +
                 "'s weights are off the mean "
                 "gradient's step by " +
                 std::to_string(gap) +
                 " (relative): every bucket must be all-reduced with "
                 "reduce_op::average and put back before the update (see "
                 "TODO(ml_scratch04b))";
      }
      if (exposed > 1.1 * last)
        return "step " + std::to_string(k) + " took " +
               std::to_string(took * 1e3) + " ms, the backward pass " +
               std::to_string(backward * 1e3) +
               " ms: " + std::to_string(exposed * 1e3) +
               " ms of all-reducing came after it, where only the first "
               "layer's bucket (" +
               std::to_string(last * 1e3) +
               " ms) must. Start each bucket's all-reduce with "
               "allreduce_async as its last layer is done and wait only "
               "before the update: see TODO(ml_scratch04b)";
    }
    if (!(loss < 0.8f * first_loss))
      return "the loss went from " + std::to_string(first_loss) + " to " +
             std::to_string(loss) + " in ten steps, expected 20% lower";
    return "";
  });
}

/// The part's program: --check (three seeds), --step (one step, event by
/// event), or ten steps as a table.
template <class Replica>
int main_overlap(int argc, char** argv) {
  auto f = exercise::parse_flags(argc, argv);
  if (!f)
    return 2;
  if (f->step != step_mode::none)
    return show_steps<Replica>(f->step, 1);
  exercise::checker cases;
  exercise::under_each_seed(
    cases, "three replicas, buckets all-reduced during backward",
    [&](uint64_t seed) { return check_overlap<Replica>(seed, seed == 1); });
  return cases.verdict();
}

} // namespace scratch04
