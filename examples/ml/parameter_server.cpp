// parameter_server: the classic parameter-server program with Lumen. A
// parameter server holds the weights (zeros) and a learning rate;
// data-parallel workers, each with a shard of the data, compute gradients
// on the weights they are given; a driver loops: get the weights, every
// worker computes a gradient in parallel, the server applies them and
// hands back the new weights. Here the data is a linear regression whose
// true weights are known.
//
// Alone, everything runs in this process:
//   ./.build/examples/ml/parameter_server
// In a cluster, the server goes to a node and the workers spread:
//   ./.build/examples/ml/parameter_server start --head --block  # machine A
//   ./.build/examples/ml/parameter_server start --address A:6380 --block
//   ./.build/examples/ml/parameter_server --address=A:6380
// Prints the first weights every 50 steps, where the server ran, and
// "parameter_server: all steps ok" once the weights are the true ones to
// 1e-3.

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include <lumen/caf_interop.hpp>
#include <lumen/cli.hpp>
#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

namespace ml = lumen::ml;

// [worker]
// A DataParallelWorker(worker_id, shard): its shard of the data (drawn
// from the same seed on every node) and compute_gradient(weights).
class DataParallelWorker {
public:
  DataParallelWorker(int worker_id, int workers)
    : shard_(ml::shard_of(ml::make_linear_regression(3000, 4, /*seed=*/7).data,
                          worker_id, workers, /*seed=*/1)) {}

  std::vector<float> compute_gradient(std::vector<float> weights) {
    std::vector<float> grad(model_.num_params());
    model_.loss_and_gradient(weights.data(), shard_, grad.data());
    return grad;
  }

private:
  ml::linear_regression model_{4};
  ml::dataset shard_;
};
LUMEN_ACTOR(DataParallelWorker, &DataParallelWorker::compute_gradient);
// [/worker]

int main(int argc, char** argv) {
  // `parameter_server start ...` makes this program a head or a node.
  if (argc > 1 && std::string{argv[1]} == "start")
    return lumen::cli_main(argc, argv);
  lumen::init(argc, argv);
  bool cluster = lumen::this_node_id() != "local";
  std::string server_node = lumen::this_node_id();
  for (auto& n : lumen::nodes())
    if (n.alive && n.id != "head")
      server_node = n.id;
  // [driver]
  const int workers = 3;
  ml::ps_config cfg; // sync SGD: a step closes with every worker's gradient
  cfg.workers = workers;
  cfg.optimizer.lr = 0.3f;
  auto ps = ml::spawn_parameter_server(cfg, ml::linear_regression{4}.init(0),
                                       server_node);
  std::vector<lumen::ActorHandle<DataParallelWorker>> pool;
  for (int w = 0; w < workers; ++w) {
    auto a = lumen::actor<DataParallelWorker>(w, workers);
    pool.push_back(cluster ? a.spread().remote() : a.remote());
  }
  auto weights = lumen::get(lumen::call(ps, ml::get_weights_atom::value));
  for (int step = 0; step < 300; ++step) {
    std::vector<lumen::ObjectRef<std::vector<float>>> grads;
    for (auto& w : pool)
      grads.push_back(w.call(&DataParallelWorker::compute_gradient,
                             weights.to_vector<float>()));
    std::vector<lumen::ObjectRef<ml::tensor>> applied;
    for (auto& g : lumen::get(grads))
      applied.push_back(
        lumen::call(ps, ml::apply_gradients_atom::value, ml::tensor::from(g)));
    weights = lumen::get(applied)[0]; // the same new weights for all
    if (step % 50 == 0)
      std::cout << "step " << step << ": weights " << weights.data<float>()[0]
                << " " << weights.data<float>()[1] << " ...\n";
  }
  // [/driver]
  auto truth = ml::make_linear_regression(3000, 4, 7);
  bool ok = true;
  for (size_t i = 0; i < 4; ++i)
    ok = ok && std::abs(weights.data<float>()[i] - truth.weights[i]) < 1e-3f;
  std::cout << "server on " << server_node << ", true weights "
            << truth.weights[0] << " " << truth.weights[1] << " ...\n";
  lumen::shutdown();
  std::cout << (ok ? "parameter_server: all steps ok"
                   : "parameter_server: weights are off")
            << "\n";
  return ok ? 0 : 1;
}
