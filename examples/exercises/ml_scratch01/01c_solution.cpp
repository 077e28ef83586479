// ml_scratch01c: the driver's loop with futures — the reference:
// 01c_starter.cpp with its TODO done.

#include "server_and_workers.hpp"

namespace scratch01 {

// The seed's driver: every step, every worker's gradient at the server's
// weights at once, then the server's step with all of them.
std::vector<float>
train(lumen::ActorHandle<ParameterServer>& ps,
      const std::vector<lumen::ActorHandle<DataParallelWorker>>& workers,
      int steps) {
  auto weights = lumen::get(ps.call(&ParameterServer::get_weights));
  for (int step = 0; step < steps; ++step) {
    std::vector<lumen::ObjectRef<std::vector<float>>> grads;
    for (auto& w : workers)
      grads.push_back(w.call(&DataParallelWorker::compute_gradient, weights));
    weights =
      lumen::get(ps.call(&ParameterServer::apply_gradients, lumen::get(grads)));
  }
  return weights;
}

} // namespace scratch01

int main(int argc, char** argv) {
  return scratch01::part_c::main<scratch01::ParameterServer,
                                 scratch01::DataParallelWorker>(
    argc, argv, scratch01::train);
}
