// ddp_training: your own train loop, run data-parallel as Ray Train runs
// one: every worker runs it in a process of its own on a model replica and
// its share of Fashion-MNIST; the replicas' mean gradient is all-reduced
// bucket by bucket while the backward pass goes on, so they stay identical
// to the bit. Rank 0 reports each epoch and a checkpoint; a lost worker is
// replaced from the last checkpoint; the best one is tested at the end;
// every rank's reports are rows of the run folder's metrics files.
// (`lumen train fashion-mnist` is the full-featured run of this.)
//
//   ./.build/examples/ml/ddp_training                    # 2 workers, 8 epochs
//   ./.build/examples/ml/ddp_training --workers=1        # the same, alone
//   ./.build/examples/ml/ddp_training --address=A:6380   # on a cluster's nodes
//
// Without --address the workers run in local node processes of this
// program (lumen::init's local_nodes). Prints a line per epoch, then
// "ddp_training: all steps ok" once the test accuracy passes 0.80. Needs
// dataset-fashion-mnist.

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>
#include <lumen/train.hpp>

namespace ml = lumen::ml;
namespace train = lumen::train;

// [loop]
/// Every worker's loop: its share of the training set, the same initial
/// weights (one seed), the gradient averaged over the replicas while
/// backward runs; rank 0's checkpoint is what a restarted group goes on
/// from.
void fashion_loop(const train::loop_config& cfg) {
  auto& ctx = train::get_context();
  auto all = ml::node_fashion_mnist(ml::split::train, train::fashion_mnist_mean,
                                    train::fashion_mnist_std);
  auto mine = ml::share_of(all, ctx.world_rank, ctx.world_size);
  ml::model_file model{{"mlp", 784, {128}, 10}, {}, {}, {}};
  auto net = ml::make_model(model.spec);
  model.params = net->init(7); // the same on every rank
  size_t first = 0;
  if (auto& from = train::get_checkpoint()) {
    model = ml::parse_model_file(from->files.at("model"), "checkpoint");
    first = std::stoul(model.metadata.at("epochs_done"));
  }
  auto& w = model.params;
  ml::optimizer opt{
    {ml::optimizer_kind::sgd, float(train::value_or(cfg, "lr", 0.1))},
    w.size()};
  train::bucketed_allreduce sync{*net, ctx.group};
  // Each epoch's order follows from the seed and the epoch number.
  ml::batch_stream batches{mine, 64, 100 + ctx.world_rank + first, true};
  std::vector<float> grad(w.size());
  auto epochs = size_t(train::value_or(cfg, "epochs", 8));
  for (auto epoch = first; epoch < epochs; ++epoch) {
    double loss = 0;
    auto steps = batches.batches_per_epoch();
    for (size_t s = 0; s < steps; ++s) {
      loss +=
        sync.loss_and_mean_gradient(w.data(), batches.next().data, grad.data());
      opt.step(w.data(), grad.data(), grad.size());
    }
    model.metadata["epochs_done"] = std::to_string(epoch + 1);
    train::checkpoint c;
    c.files["model"] = ml::model_file_bytes(model);
    train::report({{"epoch", double(epoch + 1)},
                   {"loss", loss / double(steps)},
                   {"drift", train::drift(w, ctx.group)}},
                  c);
  }
}
LUMEN_TRAIN_LOOP(fashion_loop);
// [/loop]

int main(int argc, char** argv) {
  CLI::App app{"Fashion-MNIST trained data-parallel"};
  size_t workers = 2;
  double epochs = 8, lr = 0.1;
  std::string storage; // ~/lumen_results
  lumen::init_options opts;
  app.add_option("--workers", workers, "workers, a process each")
    ->check(CLI::Range(1, 8));
  app.add_option("--epochs", epochs, "passes over the training set")
    ->check(CLI::Range(1, 100));
  app.add_option("--lr", lr, "learning rate of plain SGD")
    ->check(CLI::PositiveNumber);
  app.add_option("--storage", storage,
                 "where checkpoints go (default ~/lumen_results)");
  app.add_option("--address", opts.address, "a cluster's head, HOST:PORT");
  CLI11_PARSE(app, argc, argv);
  try {
    if (opts.address.empty())
      opts.local_nodes = int(workers);
    lumen::init(opts);
    // [fit]
    train::run_config run;
    run.name = "ddp_training";
    run.storage_path = storage;
    run.failure.max_failures = 1; // a lost worker: once from a checkpoint
    run.checkpoint_score = "loss";
    run.score_max = false;
    // Every rank's reports as rows of the run folder's metrics files
    // (rank 0's alone by default).
    run.report_ranks = train::ranks::all;
    run.on_report = [](const train::metrics& m) {
      std::printf("epoch %2.0f  loss %.4f  drift %g\n", m.at("epoch"),
                  m.at("loss"), m.at("drift"));
      std::fflush(stdout);
    };
    train::data_parallel_trainer trainer{
      "fashion_loop", {{"epochs", epochs}, {"lr", lr}}, {workers}, run};
    auto result = trainer.fit();
    // The best checkpoint, tested here on the 10,000 test images.
    auto best = ml::load_model_file(result.best_checkpoint + "/model");
    auto test = ml::node_fashion_mnist(
      ml::split::test, train::fashion_mnist_mean, train::fashion_mnist_std);
    auto accuracy =
      ml::make_model(best.spec)->accuracy(best.params.data(), test);
    // [/fit]
    std::printf("test accuracy %.4f of %s (%d restarts)\n", accuracy,
                result.best_checkpoint.c_str(), result.failures);
    std::printf("every rank's reports: %s/metrics.csv\n",
                train::run_dir(run).c_str());
    lumen::shutdown();
    bool ok = accuracy >= 0.80;
    std::printf("%s\n", ok ? "ddp_training: all steps ok"
                           : "ddp_training: the accuracy stayed below 0.80");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_training: %s\n", e.what());
    lumen::shutdown();
    return 1;
  }
}
