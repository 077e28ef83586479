// ml_scratch02b: the async loop with lumen::wait — your file.
// Four workers compute gradients for an async server; one of them, on a
// node three times as slow, is a straggler. Write the driver the way
// Ray's async parameter-server example does: start every worker, then
// again and again take whichever gradient is ready first, have the
// server apply it, and start that worker again on the new weights, while
// the others keep computing. --check runs it on a simulated cluster under
// three seeds; --step shows a dozen updates, message by message.
//
//   lumen exercises check ml_scratch02b

#include "cluster.hpp"

namespace scratch02 {

// `updates` updates of the server `ps` from `workers`; the weights at the
// end.
std::vector<float> train(lumen::ActorHandle<Server>& ps,
                         const std::vector<lumen::ActorHandle<Worker>>& workers,
                         int updates) {
  auto [weights, version] = lumen::get(ps.call(&Server::get_weights));
  std::vector<lumen::ObjectRef<versioned>> pending;
  for (auto& w : workers)
    pending.push_back(w.call(&Worker::compute_gradient, weights, version));
  for (int u = 0; u < updates; ++u) {
    // TODO(ml_scratch02b): lumen::wait(pending, 1).ready.front() is the
    // first gradient ready; find its worker i (std::find on pending),
    // lumen::get it ({gradient, the version it was computed at}), have
    // the server apply it (ps.call(&Server::apply_gradient, grad,
    // at) answers the new {weights, version}), and start worker i again
    // on those: pending[i] = workers[i].call(...).
  }
  return weights;
}

} // namespace scratch02

int main(int argc, char** argv) {
  return scratch02::main_async(argc, argv, scratch02::train);
}
