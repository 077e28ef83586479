// ps_training: Fashion-MNIST trained through a parameter server by
// data-parallel workers, each a typed actor with its shard (read on its
// node, from the one copy of the data set every process there maps), a
// model replica and a thread of its own, pulling weights and pushing
// gradients on its own. The practices of the trade are flags:
//
//   ./.build/examples/ps_training                         # sync SGD, 4 workers
//   ./.build/examples/ps_training --straggler=3            # worker 0 3x slower
//   ./.build/examples/ps_training --straggler=3 --backup=1 # ... left behind
//   ./.build/examples/ps_training --mode=async --clip=5    # on arrival
//   ./.build/examples/ps_training --codec=int8             # 1/4 of the bytes
//   ./.build/examples/ps_training --broadcast=int8         # ... back too
//   ./.build/examples/ps_training start --head --block     # machine A
//   ./.build/examples/ps_training start --address A:6380 --block  # B, C...
//   ./.build/examples/ps_training --address=A:6380         # workers spread
//
// Prints the server's version, test loss and accuracy and the pace every
// second, then the server's and the workers' counts, and
// "ps_training: all steps ok" once the test accuracy passes 0.80.
// Needs dataset-fashion-mnist.

#include <chrono>
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

int main(int argc, char** argv) {
  // `ps_training start ...` makes this program a head or a node.
  if (argc > 1 && std::string{argv[1]} == "start")
    return lumen::cli_main(argc, argv);
  CLI::App app{"Fashion-MNIST through a parameter server"};
  std::string mode = "sync", codec = "none", broadcast = "none";
  size_t workers = 4, backup = 0;
  uint64_t steps = 600, rebroadcast = 20, seed = 1;
  float lr = 0.1f, clip = 0;
  double straggler = 1;
  bool no_feedback = false;
  lumen::init_options opts;
  app.add_option("--mode", mode, "sync or async")
    ->check(CLI::IsMember({"sync", "async"}));
  app.add_option("--workers", workers, "data-parallel workers")
    ->check(CLI::Range(1, 64));
  app.add_option("--backup", backup,
                 "sync: close a step without the last B workers");
  app.add_option("--steps", steps, "server steps (async: x workers updates)")
    ->check(CLI::PositiveNumber);
  app.add_option("--lr", lr, "learning rate")->check(CLI::PositiveNumber);
  app.add_option("--clip", clip, "clip gradients to this global norm");
  app.add_option("--codec", codec, "gradients on the wire: none, fp16, int8")
    ->check(CLI::IsMember({"none", "fp16", "int8"}));
  app.add_flag("--no-error-feedback", no_feedback,
               "int8, fp16: drop what each step's rounding lost");
  app
    .add_option("--broadcast", broadcast,
                "sync: weights back as none, or fp16, int8 changes")
    ->check(CLI::IsMember({"none", "fp16", "int8"}));
  app.add_option("--rebroadcast", rebroadcast,
                 "with --broadcast: the full weights every K versions");
  app.add_option("--seed", seed,
                 "the run's seed; every other is drawn from it");
  app.add_option("--straggler", straggler, "worker 0 takes this many times")
    ->check(CLI::Range(1.0, 100.0));
  app.add_option("--address", opts.address, "a cluster's head, HOST:PORT");
  CLI11_PARSE(app, argc, argv);
  try {
    lumen::init(opts);
    // Held once per machine, whoever asks (the workers of this node too).
    auto test = ml::node_fashion_mnist(ml::split::test, 0.2860f, 0.3530f);
    std::vector<std::string> places;
    for (auto& n : lumen::nodes())
      if (n.alive)
        places.push_back(n.id);
    // [train]
    ml::ps_config cfg;
    cfg.mode = mode == "sync" ? ml::ps_mode::sync : ml::ps_mode::async;
    cfg.workers = workers;
    cfg.backup = backup;
    cfg.optimizer.lr = lr;
    cfg.clip_norm = clip;
    auto codec_of = [](const std::string& name) {
      return name == "fp16"   ? ml::codec::fp16
             : name == "int8" ? ml::codec::int8
                              : ml::codec::none;
    };
    cfg.broadcast = codec_of(broadcast);
    cfg.rebroadcast_every = rebroadcast;
    ml::model_spec model{"mlp", 784, {128}, 10};
    auto net = ml::make_model(model);
    // Seeds drawn from one: the same run again with the same --seed.
    auto ps = ml::spawn_parameter_server(
      cfg, net->init(ml::derive_seed(seed, 0)), lumen::this_node_id());
    std::vector<lumen::ObjectRef<ml::worker_report>> runs;
    auto until = cfg.mode == ml::ps_mode::sync ? steps : steps * workers;
    for (size_t w = 0; w < workers; ++w) {
      ml::worker_config wcfg;
      wcfg.model = model;
      wcfg.batch_size = 64;
      wcfg.seed = ml::derive_seed(seed, 1 + w); // each its own batch order
      wcfg.compression = codec_of(codec);
      wcfg.error_feedback = !no_feedback;
      wcfg.slow.factor = w == 0 ? straggler : 1;
      ml::node_shard shard; // read on the worker's node, from its one copy
      shard.worker = w;
      shard.workers = workers;
      auto worker = ml::spawn_worker(wcfg, shard, places[w % places.size()]);
      runs.push_back(lumen::call(worker, ml::train_atom::value, ps, until));
    }
    // [/train]
    auto start = std::chrono::steady_clock::now();
    for (bool done = false; !done;) {
      done =
        lumen::wait(runs, runs.size(), std::chrono::seconds(1)).pending.empty();
      auto [version, w] = lumen::get(lumen::call(ps, ml::pull_atom::value));
      std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
      std::printf("%6.1f s  version %6llu  test loss %.4f  accuracy %.4f  "
                  "%.0f steps/s\n",
                  took.count(), static_cast<unsigned long long>(version),
                  net->loss(w.data<float>(), test),
                  net->accuracy(w.data<float>(), test),
                  static_cast<double>(version) / took.count());
    }
    auto stats = lumen::get(lumen::call(ps, ml::ps_stats_atom::value));
    auto final_weights =
      lumen::get(lumen::call(ps, ml::get_weights_atom::value));
    std::printf(
      "server: %llu gradients applied in %llu steps, %llu late, "
      "%llu too stale, replicas' drift at most %.2g\n",
      static_cast<unsigned long long>(stats.applied),
      static_cast<unsigned long long>(stats.steps),
      static_cast<unsigned long long>(
        stats.refused[static_cast<size_t>(ml::ps_refusal::late) - 1]),
      static_cast<unsigned long long>(
        stats.refused[static_cast<size_t>(ml::ps_refusal::too_stale) - 1]),
      static_cast<double>(stats.drift_max));
    size_t w = 0;
    for (auto& r : lumen::get(runs)) {
      std::printf("worker %zu on %s: %llu gradients, %llu taken, %.1f MB "
                  "sent, %.1f MB received, compute %.2f s, waiting for data "
                  "%.3f s, slowed %.2f s\n",
                  w, places[w % places.size()].c_str(),
                  static_cast<unsigned long long>(r.steps),
                  static_cast<unsigned long long>(r.pushed),
                  static_cast<double>(r.bytes_sent) / 1e6,
                  static_cast<double>(r.bytes_received) / 1e6,
                  r.compute_seconds, r.data_wait_seconds, r.slow_seconds);
      ++w;
    }
    auto accuracy = net->accuracy(final_weights.data<float>(), test);
    lumen::shutdown();
    std::printf("%s\n", accuracy >= 0.80f
                          ? "ps_training: all steps ok"
                          : "ps_training: the accuracy stayed below 0.80");
    return accuracy >= 0.80f ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps_training: %s\n", e.what());
    lumen::shutdown();
    return 1;
  }
}
