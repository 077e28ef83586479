// ml_scratch02c: the sync barrier and backup workers — the reference:
// 02c_starter.cpp with its TODO done.

#include "cluster.hpp"

namespace scratch02 {

// Sync steps: every worker computes on the same weights; the step closes
// with the first workers.size() - backup gradients, the others dropped.
std::vector<float> train(lumen::ActorHandle<Server>& ps,
                         const std::vector<lumen::ActorHandle<Worker>>& workers,
                         int steps, int backup) {
  auto [weights, version] = lumen::get(ps.call(&Server::get_weights));
  for (int s = 0; s < steps; ++s) {
    std::vector<lumen::ObjectRef<versioned>> step;
    for (auto& w : workers)
      step.push_back(w.call(&Worker::compute_gradient, weights, version));
    auto first =
      lumen::wait(step, workers.size() - static_cast<size_t>(backup));
    std::vector<std::vector<float>> grads;
    for (auto& ref : first.ready)
      grads.push_back(lumen::get(ref).first);
    std::tie(weights, version) =
      lumen::get(ps.call(&Server::apply_mean, grads));
  }
  return weights;
}

} // namespace scratch02

int main(int argc, char** argv) {
  return scratch02::main_sync(argc, argv, scratch02::train);
}
