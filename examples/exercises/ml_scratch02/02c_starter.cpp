// ml_scratch02c: the sync barrier and backup workers — your file.
// The same server and workers as 02b, node-4's worker three times as
// slow. Write the sync driver: each step, every worker computes a
// gradient on the same weights, and the server makes one step with the
// mean — of all of them with no backup worker, of the first
// workers.size() - backup to come with `backup` backup workers, the late
// ones dropped. --check runs it with 0 and 1 backup workers on a
// simulated cluster under three seeds; --step shows three steps, message
// by message.
//
//   lumen exercises check ml_scratch02c

#include "cluster.hpp"

namespace scratch02 {

// `steps` sync steps of the server `ps` with `workers`, each closed by the
// first workers.size() - backup gradients; the weights at the end.
std::vector<float> train(lumen::ActorHandle<Server>& ps,
                         const std::vector<lumen::ActorHandle<Worker>>& workers,
                         int steps, int backup) {
  auto [weights, version] = lumen::get(ps.call(&Server::get_weights));
  for (int s = 0; s < steps; ++s) {
    // TODO(ml_scratch02c): call compute_gradient(weights, version) on
    // every worker; lumen::wait(step, workers.size() - backup) returns
    // once that many are ready (.ready holds them, in worker order); get
    // their gradients (.first of each answer) and have the server step
    // with them: lumen::get(ps.call(&Server::apply_mean, grads)) answers
    // the new {weights, version}.
    (void)workers;
    (void)backup;
  }
  return weights;
}

} // namespace scratch02

int main(int argc, char** argv) {
  return scratch02::main_sync(argc, argv, scratch02::train);
}
