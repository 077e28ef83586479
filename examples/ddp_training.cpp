// ddp_training: Fashion-MNIST trained data-parallel, the way Ray Train
// does it: every worker runs the same train loop in a process of its own
// on a model replica and its share of the data, and the replicas' mean
// gradient is all-reduced bucket by bucket while the backward pass goes on,
// so that they stay identical to the bit. Rank 0 reports each epoch's loss,
// test accuracy and a checkpoint; a worker that dies is replaced from the
// last checkpoint.
//
//   ./build/examples/ddp_training                    # 2 workers, 8 epochs
//   ./build/examples/ddp_training --workers=1        # the same, alone
//   ./build/examples/ddp_training --address=A:6380   # on a cluster's nodes
//
// Without --address the workers run in local node processes of this
// program (lumen::init's local_nodes). Prints a line per epoch, then
// "ddp_training: all steps ok" once the test accuracy passes 0.80. Needs
// dataset-fashion-mnist.

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>
#include <lumen/train.hpp>

namespace ml = lumen::ml;
namespace train = lumen::train;

namespace {

// [loop]
/// Every worker's loop: its share of the training set, the same initial
/// weights (one seed), momentum SGD with cosine decay, the gradient
/// averaged over the replicas while backward runs.
void fashion_loop(const train::loop_config& cfg) {
  auto& ctx = train::get_context();
  auto rank = size_t(ctx.world_rank), world = size_t(ctx.world_size);
  auto all = ml::node_fashion_mnist(ml::split::train, 0.2860f, 0.3530f);
  auto mine = ml::share_of(all, rank, world);
  ml::mlp net{784, {256, 128}, 10};
  auto seed = uint64_t(train::value_or(cfg, "seed", 1));
  auto w = net.init(ml::derive_seed(seed, 0));
  ml::optimizer opt{{ml::optimizer_kind::momentum,
                     float(train::value_or(cfg, "lr", 0.05)), 0.9f},
                    w.size()};
  size_t first = 0;
  if (auto& from = train::get_checkpoint()) { // a restart: go on from it
    auto dir = "/tmp/" + ctx.group + "." + std::to_string(rank);
    from->to_directory(dir);
    auto file = ml::load_safetensors(dir + "/model.safetensors");
    w = file.tensors.at("weights").to_vector<float>();
    *opt.state()[0] = file.tensors.at("velocity").to_vector<float>();
    first = std::stoul(file.metadata.at("epochs_done"));
    std::filesystem::remove_all(dir);
  }
  train::bucketed_allreduce sync{net, ctx.group};
  auto batch = size_t(train::value_or(cfg, "batch", 64));
  ml::batch_stream batches{mine, batch, ml::derive_seed(seed, 1 + rank), true};
  auto epochs = size_t(train::value_or(cfg, "epochs", 8));
  auto steps = mine.size() / batch;
  std::vector<float> grad(w.size());
  auto test = rank == 0
                ? ml::node_fashion_mnist(ml::split::test, 0.2860f, 0.3530f)
                : ml::dataset{};
  for (auto epoch = first; epoch < epochs; ++epoch) {
    auto start = std::chrono::steady_clock::now();
    double loss = 0, exposed = 0;
    for (size_t s = 0; s < steps; ++s) {
      auto t = double(epoch * steps + s) / double(epochs * steps);
      loss +=
        sync.loss_and_mean_gradient(w.data(), batches.next().data, grad.data());
      opt.step(w.data(), grad.data(), grad.size(),
               float(0.5 * (1 + std::cos(M_PI * t))));
      exposed += sync.last_step().exposed();
    }
    std::chrono::duration<double> took =
      std::chrono::steady_clock::now() - start;
    train::checkpoint c;
    if (rank == 0) {
      auto dir = "/tmp/" + ctx.group + ".out";
      ml::safetensors_file file;
      file.tensors["weights"] = ml::tensor::from(w);
      file.tensors["velocity"] = ml::tensor::from(*opt.state()[0]);
      file.metadata["epochs_done"] = std::to_string(epoch + 1);
      file.metadata["model"] = net.name();
      std::filesystem::create_directories(dir);
      ml::save_safetensors(dir + "/model.safetensors", file);
      c = train::checkpoint::from_directory(dir);
      std::filesystem::remove_all(dir);
    }
    train::report(
      {{"epoch", double(epoch + 1)},
       {"loss", loss / double(steps)},
       {"test_accuracy", rank == 0 ? net.accuracy(w.data(), test) : 0},
       {"epoch_seconds", took.count()},
       {"exposed_allreduce_seconds", exposed},
       {"drift", train::drift(w, ctx.group)}},
      c);
  }
}
LUMEN_TRAIN_LOOP(fashion_loop);
// [/loop]

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Fashion-MNIST trained data-parallel"};
  size_t workers = 2;
  double epochs = 8, lr = 0.05;
  int max_failures = 1;
  std::string storage; // ~/lumen_results
  lumen::init_options opts;
  app.add_option("--workers", workers, "workers, a process each")
    ->check(CLI::Range(1, 16));
  app.add_option("--epochs", epochs, "passes over the training set")
    ->check(CLI::Range(1, 100));
  app.add_option("--lr", lr, "learning rate (cosine decay to 0)")
    ->check(CLI::PositiveNumber);
  app.add_option("--max-failures", max_failures, "restarts allowed");
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
    run.name = "fashion_mnist";
    run.storage_path = storage;
    run.failure.max_failures = max_failures;
    run.checkpoint_score = "test_accuracy";
    run.on_report = [](const train::metrics& m) {
      std::printf("epoch %2.0f  loss %.4f  test accuracy %.4f  %.2f s "
                  "(all-reduce waited %.3f s)  drift %g\n",
                  m.at("epoch"), m.at("loss"), m.at("test_accuracy"),
                  m.at("epoch_seconds"), m.at("exposed_allreduce_seconds"),
                  m.at("drift"));
      std::fflush(stdout);
    };
    train::data_parallel_trainer trainer{
      "fashion_loop", {{"epochs", epochs}, {"lr", lr}}, {workers}, run};
    auto result = trainer.fit();
    // [/fit]
    auto accuracy = result.last.at("test_accuracy");
    std::printf("best checkpoint: %s (%d restarts)\n",
                result.best_checkpoint.c_str(), result.failures);
    lumen::shutdown();
    std::printf("%s\n", accuracy >= 0.80 ? "ddp_training: all steps ok"
                                         : "ddp_training: the accuracy "
                                           "stayed below 0.80");
    return accuracy >= 0.80 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_training: %s\n", e.what());
    lumen::shutdown();
    return 1;
  }
}
