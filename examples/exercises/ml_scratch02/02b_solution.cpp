// ml_scratch02b: the async loop with lumen::wait — the reference:
// 02b_starter.cpp with its TODO done.

#include "cluster.hpp"

namespace scratch02 {

// Ray's async parameter server: every worker computes at once; whichever
// gradient is ready first is applied, and that worker starts again on
// the new weights while the others go on.
std::vector<float> train(lumen::ActorHandle<Server>& ps,
                         const std::vector<lumen::ActorHandle<Worker>>& workers,
                         int updates) {
  auto [weights, version] = lumen::get(ps.call(&Server::get_weights));
  std::vector<lumen::ObjectRef<versioned>> pending;
  for (auto& w : workers)
    pending.push_back(w.call(&Worker::compute_gradient, weights, version));
  for (int u = 0; u < updates; ++u) {
    auto ready = lumen::wait(pending, 1).ready.front();
    auto i = static_cast<size_t>(
      std::find(pending.begin(), pending.end(), ready) - pending.begin());
    auto [grad, at] = lumen::get(ready);
    std::tie(weights, version) =
      lumen::get(ps.call(&Server::apply_gradient, grad, at));
    pending[i] = workers[i].call(&Worker::compute_gradient, weights, version);
  }
  return weights;
}

} // namespace scratch02

int main(int argc, char** argv) {
  return scratch02::main_async(argc, argv, scratch02::train);
}
