// ml_scratch01b: the server and the workers as Lumen actors — your file.
// The seed's ParameterServer and DataParallelWorker are classes whose
// objects live on nodes of the cluster: Lumen actors. The driver (part
// 01c) calls their methods from afar and gets futures back. Write the
// bodies below (the TODOs); the rules are 01a's. --check asks your actors
// what the seed's program asks, on a simulated cluster of four nodes
// under three seeds; --step shows every message and method call.
//
//   lumen exercises check ml_scratch01b

#include "harness.hpp"

namespace scratch01 {

// The seed's ParameterServer: the model's weights and a learning rate.
class ParameterServer {
public:
  ParameterServer(int problem, float lr)
    : lr_(lr) {
    // TODO(ml_scratch01b): start from the model's initial weights,
    // model_of(problem)->init(0).
    (void)problem;
  }

  std::vector<float> get_weights() {
    // TODO(ml_scratch01b): answer the weights the server holds now.
    return {};
  }

  // One step against the mean of the workers' gradients.
  std::vector<float> apply_gradients(std::vector<std::vector<float>> grads) {
    // TODO(ml_scratch01b): weights[i] -= lr * (the mean of grads[w][i]),
    // then answer the new weights.
    (void)grads;
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
    // TODO(ml_scratch01b): the model's gradient at `weights` on the next
    // batch of this worker's shard: model_->loss_and_gradient(params,
    // shard_.next(), grad.data()).
    (void)weights;
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

int main(int argc, char** argv) {
  return scratch01::part_b::main<scratch01::ParameterServer,
                                 scratch01::DataParallelWorker>(argc, argv);
}
