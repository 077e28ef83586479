#pragma once

// The server and the workers of part 01b as its reference writes them,
// registered as Lumen actors: 01b's reference, and what part 01c's driver
// runs.

#include "harness.hpp"

namespace scratch01 {

// The seed's ParameterServer: the model's weights and a learning rate.
class ParameterServer {
public:
  ParameterServer(int problem, float lr)
    : weights_(model_of(problem)->init(0))
    , lr_(lr) {}

  std::vector<float> get_weights() {
    return weights_;
  }

  // One step against the mean of the workers' gradients.
  std::vector<float> apply_gradients(std::vector<std::vector<float>> grads) {
    for (size_t i = 0; i < weights_.size(); ++i) {
      float sum = 0;
      for (auto& g : grads)
        sum += g[i];
      weights_[i] -= lr_ * sum / static_cast<float>(grads.size());
    }
    return weights_;
  }

private:
  std::vector<float> weights_;
  float lr_;
};

// The seed's DataParallelWorker: a model and a shard of the data.
class DataParallelWorker {
public:
  DataParallelWorker(int problem, int worker_id)
    : model_(model_of(problem))
    , shard_(problem, worker_id) {}

  // The gradient at the weights the server sent, on the next batch.
  std::vector<float> compute_gradient(std::vector<float> weights) {
    std::vector<float> grad(model_->num_params());
    model_->loss_and_gradient(weights.data(), shard_.next(), grad.data());
    return grad;
  }

private:
  std::unique_ptr<ml::model> model_;
  shard shard_;
};

} // namespace scratch01

// Lumen actors: the methods callers may call, and the constructor a node
// builds one with.
LUMEN_ACTOR(scratch01::ParameterServer,
            &scratch01::ParameterServer::get_weights,
            &scratch01::ParameterServer::apply_gradients);
LUMEN_ACTOR_CTOR(scratch01::ParameterServer(int, float));
LUMEN_ACTOR(scratch01::DataParallelWorker,
            &scratch01::DataParallelWorker::compute_gradient);
LUMEN_ACTOR_CTOR(scratch01::DataParallelWorker(int, int));
