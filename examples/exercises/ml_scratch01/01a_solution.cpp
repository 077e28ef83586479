// ml_scratch01a: the rules of a step — the reference: 01a_starter.cpp
// with its TODOs done.

#include "harness.hpp"

namespace scratch01 {

// A worker's gradient: its model's, at the weights the server sent, on
// the batch its shard gave.
std::vector<float> compute_gradient(const ml::model& model,
                                    const std::vector<float>& weights,
                                    const ml::dataset& batch) {
  std::vector<float> grad(model.num_params());
  model.loss_and_gradient(weights.data(), batch, grad.data());
  return grad;
}

// The server's step: the mean of the workers' gradients, times the
// learning rate, off the weights.
void apply_gradients(std::vector<float>& weights,
                     const std::vector<std::vector<float>>& grads, float lr) {
  for (size_t i = 0; i < weights.size(); ++i) {
    float sum = 0;
    for (auto& g : grads)
      sum += g[i];
    weights[i] -= lr * sum / static_cast<float>(grads.size());
  }
}

} // namespace scratch01

int main(int argc, char** argv) {
  return scratch01::part_a::main(argc, argv);
}
