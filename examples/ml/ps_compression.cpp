// ps_compression: the bytes of parameter-server training, made smaller.
// Four workers train Fashion-MNIST through a sync parameter server twice:
// float32 both ways, then int8 gradients (error feedback carries each
// step's rounding into the next) and int8 changes back, measured against
// the replica of the weights the workers hold (the full weights every 20
// versions, so that the replicas meet the server's again).
//
//   ./.build/examples/ml/ps_compression [--steps=N]
// In a cluster, two terminals: a head and a node in the first, then the
// script, whose workers spread over the nodes, in the second:
//   ./.build/examples/ml/ps_compression start --head --block &
//   ./.build/examples/ml/ps_compression start --address 127.0.0.1:6380 --block
//   ./.build/examples/ml/ps_compression --address=127.0.0.1:6380
//
// Prints each run's megabytes up and down, test accuracy and the replicas'
// largest drift from the server's weights, then the int8 run's share of
// float32's bytes (about 0.27) and "ps_compression: all steps ok" once it
// is below 0.35 and both runs passed 0.80 test accuracy. Needs
// dataset-fashion-mnist.

#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/cli.hpp>
#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

namespace ml = lumen::ml;

struct outcome {
  double bytes = 0;
  float accuracy = 0;
};

// [compressed]
// One sync run of `steps` steps; `codec` compresses the gradients going up
// and the changes coming back.
outcome train(ml::codec codec, uint64_t steps, const ml::dataset& test) {
  std::vector<std::string> places;
  for (auto& n : lumen::nodes())
    if (n.alive)
      places.push_back(n.id);
  const size_t workers = 4;
  ml::ps_config cfg; // sync SGD
  cfg.workers = workers;
  cfg.optimizer.lr = 0.1f;
  cfg.broadcast = codec;      // changes since the workers' replica
  cfg.rebroadcast_every = 20; // and the full weights every 20 versions
  ml::model_spec model{"mlp", 784, {128}, 10};
  auto net = ml::make_model(model);
  auto ps =
    ml::spawn_parameter_server(cfg, net->init(1), lumen::this_node_id());
  std::vector<lumen::ObjectRef<ml::worker_report>> runs;
  for (size_t w = 0; w < workers; ++w) {
    ml::worker_config wcfg;
    wcfg.model = model;
    wcfg.batch_size = 64;
    wcfg.seed = ml::derive_seed(1, 1 + w);
    wcfg.compression = codec;   // gradients on the wire
    wcfg.error_feedback = true; // the rounding carried into the next step
    ml::node_shard shard;       // read on the worker's node
    shard.worker = w;
    shard.workers = workers;
    auto worker = ml::spawn_worker(wcfg, shard, places[w % places.size()]);
    runs.push_back(lumen::call(worker, ml::train_atom::value, ps, steps));
  }
  // [/compressed]
  outcome out;
  for (auto& r : lumen::get(runs))
    out.bytes += double(r.bytes_sent + r.bytes_received);
  auto stats = lumen::get(lumen::call(ps, ml::ps_stats_atom::value));
  auto weights = lumen::get(lumen::call(ps, ml::get_weights_atom::value));
  out.accuracy = net->accuracy(weights.data<float>(), test);
  std::printf("%-8s %7.1f MB up and down, test accuracy %.4f, replicas' "
              "drift at most %.2g\n",
              codec == ml::codec::none ? "float32" : "int8", out.bytes / 1e6,
              out.accuracy, double(stats.drift_max));
  return out;
}

int main(int argc, char** argv) {
  // `ps_compression start ...` makes this program a head or a node.
  if (argc > 1 && std::string{argv[1]} == "start")
    return lumen::cli_main(argc, argv);
  CLI::App app{"Fashion-MNIST through a parameter server, compressed"};
  uint64_t steps = 600;
  lumen::init_options opts;
  app.add_option("--steps", steps, "server steps")->check(CLI::PositiveNumber);
  app.add_option("--address", opts.address, "a cluster's head, HOST:PORT");
  CLI11_PARSE(app, argc, argv);
  try {
    lumen::init(opts);
    auto test = ml::node_fashion_mnist(ml::split::test, 0.2860f, 0.3530f);
    auto plain = train(ml::codec::none, steps, test);
    auto int8 = train(ml::codec::int8, steps, test);
    double share = int8.bytes / plain.bytes;
    std::printf("int8 both ways: %.3f of float32's bytes\n", share);
    lumen::shutdown();
    bool ok = share < 0.35 && plain.accuracy >= 0.80f && int8.accuracy >= 0.80f;
    std::printf("%s\n", ok ? "ps_compression: all steps ok"
                           : "ps_compression: not the bytes or accuracy "
                             "expected");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps_compression: %s\n", e.what());
    lumen::shutdown();
    return 1;
  }
}
