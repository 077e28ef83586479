// ps_training: Fashion-MNIST trained through a parameter server by four
// data-parallel workers: typed actors that pull weights and push gradients
// on their own, each with its shard (read on its node, from the one copy
// every process there maps). Stragglers and what to do about them are flags:
//
//   ./.build/examples/ml/ps_training                          # sync SGD
//   ./.build/examples/ml/ps_training --straggler=3            # worker 0 3x
//   slower
//   ./.build/examples/ml/ps_training --straggler=3 --backup=1 # ... left behind
//   ./.build/examples/ml/ps_training --tail=0.05 --deadline=3 # a step cut
//   at 3 median steps when a worker takes 10x
//   ./.build/examples/ml/ps_training --mode=async --clip=5    # on arrival
// In a cluster, two terminals: a head and a node, then the script:
//   ./.build/examples/ml/ps_training start --head --block &
//   ./.build/examples/ml/ps_training start --address 127.0.0.1:6380 --block
//   ./.build/examples/ml/ps_training --address=127.0.0.1:6380
// Prints the version, test accuracy and pace every second, the server's and
// each worker's counts, and "ps_training: all steps ok" once the test
// accuracy passes 0.80. Needs dataset-fashion-mnist.

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
using ull = unsigned long long;

int main(int argc, char** argv) {
  // `ps_training start ...` makes this program a head or a node.
  if (argc > 1 && std::string{argv[1]} == "start")
    return lumen::cli_main(argc, argv);
  CLI::App app{"Fashion-MNIST through a parameter server"};
  std::string mode = "sync";
  size_t workers = 4, backup = 0;
  uint64_t steps = 600, seed = 1;
  float lr = 0.1f, clip = 0;
  double straggler = 1, tail = 0, deadline = 0;
  lumen::init_options opts;
  app.add_option("--mode", mode, "sync or async")
    ->check(CLI::IsMember({"sync", "async"}));
  app.add_option("--workers", workers, "workers")->check(CLI::Range(1, 64));
  app.add_option("--backup", backup, "sync: close a step without the last B");
  app.add_option("--deadline", deadline,
                 "sync: close a step at D times the median step with what "
                 "it has (0: none)");
  app.add_option("--steps", steps, "server steps (async: x workers updates)")
    ->check(CLI::PositiveNumber);
  app.add_option("--lr", lr, "learning rate")->check(CLI::PositiveNumber);
  app.add_option("--clip", clip, "clip gradients to this global norm");
  app.add_option("--seed", seed,
                 "the run's seed; every other is drawn from it");
  app.add_option("--straggler", straggler, "worker 0 takes this many times")
    ->check(CLI::Range(1.0, 100.0));
  app
    .add_option("--tail", tail,
                "every worker's step takes 10 times as long with this "
                "chance")
    ->check(CLI::Range(0.0, 1.0));
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
    cfg.step_deadline = deadline;
    cfg.optimizer.lr = lr;
    cfg.clip_norm = clip;
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
      wcfg.slow.factor = w == 0 ? straggler : 1;
      wcfg.slow.chance = tail;
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
      std::printf("%6.1f s  version %6llu  accuracy %.4f  %.0f steps/s\n",
                  took.count(), ull(version),
                  net->accuracy(w.data<float>(), test), version / took.count());
    }
    auto stats = lumen::get(lumen::call(ps, ml::ps_stats_atom::value));
    auto late = stats.refused[size_t(ml::ps_refusal::late) - 1];
    std::printf("server: %llu gradients applied in %llu steps, %llu late, "
                "%llu steps closed by a time limit\n",
                ull(stats.applied), ull(stats.steps), ull(late),
                ull(stats.timed_out));
    size_t w = 0;
    for (auto& r : lumen::get(runs)) {
      std::printf("worker %zu on %s: %llu gradients, compute %.2f s, waiting "
                  "for data %.3f s, slowed %.2f s\n",
                  w, places[w % places.size()].c_str(), ull(r.steps),
                  r.compute_seconds, r.data_wait_seconds, r.slow_seconds);
      ++w;
    }
    auto weights = lumen::get(lumen::call(ps, ml::get_weights_atom::value));
    auto accuracy = net->accuracy(weights.data<float>(), test);
    lumen::shutdown();
    bool ok = accuracy >= 0.80f;
    std::printf("%s\n", ok ? "ps_training: all steps ok"
                           : "ps_training: the accuracy stayed below 0.80");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps_training: %s\n", e.what());
    lumen::shutdown();
    return 1;
  }
}
