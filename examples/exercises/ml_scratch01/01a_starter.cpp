// ml_scratch01a: the rules of a step — your file.
// A server holds the weights; three workers, each with a shard of the
// data, compute gradients on the weights the server sends; the server
// averages them and steps. Fill in the two rules below (the TODOs), then
// run with --step to watch each step and --check for a verdict. Parts
// 01b and 01c make the server and the workers actors. README.md has the
// picture.
//
//   lumen exercises check ml_scratch01a

#include "harness.hpp"

namespace scratch01 {

// A worker's gradient of the model's loss at `weights` on `batch`.
std::vector<float> compute_gradient(const ml::model& model,
                                    const std::vector<float>& weights,
                                    const ml::dataset& batch) {
  std::vector<float> grad(model.num_params());
  // TODO(ml_scratch01a): fill `grad` with the gradient at `weights` on
  // `batch`: model.loss_and_gradient(params, batch, grad) computes it.
  (void)weights;
  (void)batch;
  return grad;
}

// The server's step: every worker sent a gradient (grads[w]); move the
// weights against their mean, scaled by the learning rate.
void apply_gradients(std::vector<float>& weights,
                     const std::vector<std::vector<float>>& grads, float lr) {
  // TODO(ml_scratch01a): weights[i] -= lr * (the mean of grads[w][i] over
  // the workers w), for every i.
  (void)weights;
  (void)grads;
  (void)lr;
}

} // namespace scratch01

int main(int argc, char** argv) {
  return scratch01::part_a::main(argc, argv);
}
