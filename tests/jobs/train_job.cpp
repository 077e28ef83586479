// A data-parallel trainer on an embedded cluster of local node processes
// (`--local-nodes 2`): two workers fit the synthetic linear regression
// over a bucketed all-reduce, rank 0 reporting each epoch's loss, the
// replicas' drift and a checkpoint. Given `kill`, rank 1 kills its own
// process with SIGKILL half way through epoch 2 of the first attempt, and
// the trainer goes on from the last checkpoint. Given `ranks`, both
// ranks report three times each and every rank's reports are kept in the
// run folder. Prints what the test checks, one fact a line.
//   train_job --local-nodes 2 STORAGE [kill|ranks]

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>
#include <lumen/train.hpp>

namespace ml = lumen::ml;
namespace train = lumen::train;

namespace {

std::vector<char> bytes_of(const std::vector<float>& w) {
  std::vector<char> out(w.size() * sizeof(float));
  std::memcpy(out.data(), w.data(), out.size());
  return out;
}

void linear_loop(const train::loop_config& cfg) {
  auto& ctx = train::get_context();
  auto problem = ml::make_linear_regression(4000, 8, 7, 0.001f);
  auto shard = ml::shard_of(problem.data, size_t(ctx.world_rank),
                            size_t(ctx.world_size), 1);
  ml::linear_regression net{8};
  auto w = net.init(0);
  size_t first_epoch = 0;
  if (auto& from = train::get_checkpoint()) {
    auto& saved = from->files.at("weights");
    std::memcpy(w.data(), saved.data(), saved.size());
    auto& epoch = from->files.at("epoch");
    first_epoch = std::stoul(std::string{epoch.begin(), epoch.end()});
  }
  ml::optimizer opt{{ml::optimizer_kind::sgd, 0.05f}, w.size()};
  train::bucketed_allreduce sync{net, ctx.group};
  ml::batch_stream batches{shard, 50,
                           ml::derive_seed(1, uint64_t(ctx.world_rank)), false};
  std::vector<float> grad(w.size());
  auto steps = shard.size() / 50;
  auto epochs = size_t(train::value_or(cfg, "epochs", 6));
  auto die_at = train::value_or(cfg, "kill_at_epoch", -1);
  for (auto epoch = first_epoch; epoch < epochs; ++epoch) {
    for (size_t s = 0; s < steps; ++s) {
      if (ctx.attempt == 0 && ctx.world_rank == 1 && double(epoch) == die_at &&
          s == steps / 2)
        ::raise(SIGKILL);
      auto b = batches.next();
      sync.loss_and_mean_gradient(w.data(), b.data, grad.data());
      opt.step(w.data(), grad.data(), grad.size());
    }
    train::checkpoint c;
    c.files["weights"] = bytes_of(w);
    auto next = std::to_string(epoch + 1);
    c.files["epoch"] = std::vector<char>(next.begin(), next.end());
    train::report({{"epoch", double(epoch)},
                   {"loss", net.loss(w.data(), problem.data)},
                   {"drift", train::drift(w, ctx.group)},
                   {"attempt", double(ctx.attempt)}},
                  c);
  }
}
LUMEN_TRAIN_LOOP(linear_loop);

/// Three reports from each rank, telling them apart.
void every_rank_reports(const train::loop_config&) {
  auto rank = double(train::get_context().world_rank);
  for (int epoch = 1; epoch <= 3; ++epoch)
    train::report({{"epoch", double(epoch)}, {"loss", rank + 1.0 / epoch}});
}
LUMEN_TRAIN_LOOP(every_rank_reports);

} // namespace

int main(int argc, char** argv) {
  lumen::init(argc, argv);
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i)
    if (std::string{argv[i]}.rfind("--", 0) != 0 &&
        std::string{argv[i - 1]} != "--local-nodes")
      args.push_back(argv[i]);
  if (args.empty()) {
    std::cerr << "usage: train_job --local-nodes 2 STORAGE [kill]\n";
    return 2;
  }
  bool kill = args.size() > 1 && args[1] == "kill";
  bool ranks = args.size() > 1 && args[1] == "ranks";
  train::run_config run;
  run.name = kill ? "killed" : ranks ? "ranks" : "clean";
  run.storage_path = args[0];
  run.failure.max_failures = kill ? 1 : 0;
  run.checkpoint_score = "loss";
  run.score_max = false;
  if (ranks)
    run.report_ranks = train::ranks::all;
  train::data_parallel_trainer trainer{
    ranks ? "every_rank_reports" : "linear_loop",
    {{"epochs", 6}, {"kill_at_epoch", kill ? 2 : -1}},
    {2},
    run};
  try {
    auto result = trainer.fit();
    // Written at once: the head logs to the same output meanwhile.
    std::ostringstream out;
    out << "failures=" << result.failures << "\n";
    out << "epochs reported:";
    for (auto& m : result.history)
      out << " " << m.at("epoch");
    out << "\n";
    double drift = 0;
    for (auto& m : result.history)
      if (m.count("drift") > 0)
        drift = std::max(drift, m.at("drift"));
    out << "largest drift=" << drift << "\n";
    out << "final loss=" << result.last.at("loss") << "\n";
    out << "last checkpoint=" << result.last_checkpoint << "\n";
    out << "best checkpoint=" << result.best_checkpoint << "\n";
    for (auto& e : result.errors)
      out << "attempt failed: " << e << "\n";
    std::cout << out.str() << std::flush;
  } catch (const std::exception& e) {
    std::cout << "fit failed: " << e.what() << "\n";
    lumen::shutdown();
    return 1;
  }
  lumen::shutdown();
  return 0;
}
