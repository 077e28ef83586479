// ml_scratch01c: the driver's loop with futures — your file.
// Part 01b's server and workers are actors on the nodes of a cluster
// (server_and_workers.hpp has them, as its reference writes them). Write
// the seed's driver: every step, ask every worker for its gradient at the
// server's weights, all at once, then have the server step with all of
// them. --check runs your driver on a simulated cluster of four nodes
// under three seeds, where a gradient takes 20 ms of compute, then on
// the embedded cluster; --step shows three steps, message by message.
//
//   lumen exercises check ml_scratch01c

#include "server_and_workers.hpp"

namespace scratch01 {

// `steps` steps of the server `ps` with `workers`; the weights at the end.
std::vector<float>
train(lumen::ActorHandle<ParameterServer>& ps,
      const std::vector<lumen::ActorHandle<DataParallelWorker>>& workers,
      int steps) {
  auto weights = lumen::get(ps.call(&ParameterServer::get_weights));
  for (int step = 0; step < steps; ++step) {
    // TODO(ml_scratch01c): call compute_gradient(weights) on every worker
    // (w.call(&DataParallelWorker::compute_gradient, weights) returns a
    // lumen::ObjectRef at once), then lumen::get the list, and make the
    // server's step with it (ps.call(&ParameterServer::apply_gradients,
    // grads)): its answer is the next weights.
    (void)workers;
  }
  return weights;
}

} // namespace scratch01

int main(int argc, char** argv) {
  return scratch01::part_c::main<scratch01::ParameterServer,
                                 scratch01::DataParallelWorker>(
    argc, argv, scratch01::train);
}
