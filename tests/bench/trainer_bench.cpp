// trainer_bench: `lumen train fashion-mnist`'s figures, in one run beside
// its baselines: the same model (--model=mlp, 784-256-128-10, or cnn,
// train::fashion_mnist_cnn) trained by the same steps in a plain loop with
// no framework (one thread), and by PyTorch (tests/bench/
// torch_fashion_mnist.py: one thread, and DistributedDataParallel over
// gloo with 2 processes) where python3-torch is installed.
//   test_accuracy          after --epochs, 2 workers
//   time_to_089_seconds    training seconds until the test accuracy
//                          reaches 0.89 (the CNN: time_to_091_seconds,
//                          0.91) (n = workers), and PyTorch's
//   epoch_seconds          n = 1 and 2 workers, the plain loop's, PyTorch's
//   epoch_seconds_ceiling  two plain loops side by side, each on half the
//                          rows and of each step's batch: the best 2
//                          workers could do here with free communication
//                          (measured before and after the Lumen runs)
//   overlap_fraction       the share of the all-reduce time the backward
//                          pass hides: 1 - (time waited after backward) /
//                          (the same with every all-reduce after backward)
// Run:  ./.build/tests/bench/trainer_bench [--json] [--model=mlp|cnn]
//         [--epochs=E] [--timing-epochs=T] [--batch=B] [--torch=auto|off]
// The workers are local node processes of this program. Needs
// dataset-fashion-mnist; about 3 minutes with PyTorch.

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>
#include <lumen/train.hpp>
#include <lumen/util/huge_pages.hpp>

#include "bench_report.hpp"

namespace ml = lumen::ml;
namespace train = lumen::train;
using lumen::bench::figure;

namespace {

struct settings {
  size_t epochs = 20;       // the accuracy runs
  size_t timing_epochs = 3; // the epoch-time runs
  size_t limit = 0;         // training rows (0: all)
  size_t test_limit = 0;
  // lumen train's defaults, for 2 workers: every run takes as many rows a
  // step across its workers (64, PyTorch's batch).
  size_t batch = 2 * train::fashion_mnist_defaults::batch;
  double lr = train::fashion_mnist_defaults::lr;
  double weight_decay = train::fashion_mnist_defaults::weight_decay;
  bool torch = true;
  std::string model = "mlp";
};

struct run_figures {
  std::vector<double> seconds, accuracy, exposed;
  double setup = 0; // from fit() to the first step's progress report
};

/// True if some process of this user on this machine maps a Fashion-MNIST
/// training block (node_fashion_mnist's), which a first fit then maps
/// rather than makes.
bool data_set_mapped() {
  auto prefix = "lumen." + std::to_string(::getuid()) + ".fashion-mnist.train";
  for (auto& e : std::filesystem::directory_iterator{"/dev/shm"})
    if (e.path().filename().string().rfind(prefix, 0) == 0)
      return true;
  return false;
}

/// The trainer on `workers` local node processes, as `lumen train` runs it.
run_figures lumen_run(const settings& s, size_t workers, size_t epochs,
                      bool overlap, const std::string& storage) {
  run_figures out;
  train::run_config run;
  run.name = "bench_" + std::to_string(workers) + (overlap ? "" : "_serial");
  run.storage_path = storage;
  run.checkpoints_kept = 1;
  auto fit_start = std::chrono::steady_clock::now();
  run.on_progress = [&](const train::metrics&) {
    if (out.setup == 0)
      out.setup = std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - fit_start)
                    .count();
  };
  run.on_report = [&](const train::metrics& m) {
    out.seconds.push_back(m.at("epoch_seconds"));
    out.accuracy.push_back(m.at("test_accuracy"));
    out.exposed.push_back(m.at("exposed_allreduce_seconds"));
    std::fprintf(stderr,
                 "  lumen %zu worker(s)%s epoch %.0f: %.2f s, test "
                 "accuracy %.4f\n",
                 workers, overlap ? "" : " (no overlap)", m.at("epoch"),
                 m.at("epoch_seconds"), m.at("test_accuracy"));
  };
  train::data_parallel_trainer trainer{train::fashion_mnist_loop,
                                       {{"epochs", epochs},
                                        {"lr", s.lr},
                                        {"batch", s.batch / workers},
                                        {"weight_decay", s.weight_decay},
                                        {"limit", s.limit},
                                        {"test_limit", s.test_limit},
                                        {"overlap", overlap ? 1 : 0},
                                        {"model", s.model}},
                                       {workers},
                                       run};
  fit_start = std::chrono::steady_clock::now();
  trainer.fit();
  return out;
}

/// The same steps with no framework on this thread: one replica, the whole
/// batch; or, as shard `shard` of `shards`, that share of the rows and of
/// each step's batch (what a worker computes, without any communication).
std::vector<double> plain_loop(const settings& s, size_t epochs,
                               size_t shard = 0, size_t shards = 1) {
  auto all = ml::load_fashion_mnist(ml::split::train);
  ml::standardize(all, train::fashion_mnist_mean, train::fashion_mnist_std);
  if (s.limit > 0 && s.limit < all.size())
    all = {all.features.rows(0, s.limit), all.labels.rows(0, s.limit)};
  if (shards > 1)
    all = ml::shard_of(all, shard, shards, 1);
  auto model = train::fashion_mnist_model(s.model, "256,128");
  auto net_ptr = ml::make_model(model);
  auto& net = *net_ptr;
  auto w = net.init(ml::derive_seed(1, 0));
  ml::optimizer_config rule{ml::optimizer_kind::momentum, float(s.lr)};
  rule.weight_decay = float(s.weight_decay);
  ml::optimizer opt{rule, w.size()};
  ml::batch_stream batches{all, s.batch / shards, ml::derive_seed(1, 1 + shard),
                           true};
  std::vector<float> grad(w.size());
  std::vector<double> out;
  auto steps = batches.batches_per_epoch();
  double loss = 0;
  for (size_t e = 0; e < epochs; ++e) {
    auto start = std::chrono::steady_clock::now();
    for (size_t k = 0; k < steps; ++k) {
      auto t = double(e * steps + k) / double(epochs * steps);
      loss += net.loss_and_gradient(w.data(), batches.next().data, grad.data());
      opt.step(w.data(), grad.data(), grad.size(),
               float(0.5 * (1 + std::cos(M_PI * t))));
    }
    std::chrono::duration<double> took =
      std::chrono::steady_clock::now() - start;
    out.push_back(took.count());
    if (shards == 1)
      std::fprintf(stderr, "  plain loop epoch %zu: %.2f s\n", e + 1,
                   took.count());
  }
  lumen::bench::verify(std::isfinite(loss), "the plain loop's loss");
  return out;
}

/// What 2 workers could reach on this machine with communication free: two
/// plain loops side by side, each on its half of the rows and of each
/// step's batch; an epoch ends when the slower one's does.
std::vector<double> plain_pair(const settings& s, size_t epochs) {
  std::vector<double> second;
  std::thread other{[&] { second = plain_loop(s, epochs, 1, 2); }};
  auto first = plain_loop(s, epochs, 0, 2);
  other.join();
  for (size_t e = 0; e < first.size(); ++e) {
    first[e] = std::max(first[e], second[e]);
    std::fprintf(stderr, "  two plain loops side by side, epoch %zu: %.2f s\n",
                 e + 1, first[e]);
  }
  return first;
}

/// PyTorch's run, or nothing if python3-torch is missing.
std::optional<run_figures> torch_run(const settings& s, const char* mode,
                                     size_t epochs) {
  // Debian's python3-torch is for Debian's python3, on OpenBLAS: on its
  // reference BLAS an epoch takes an order of magnitude longer, which
  // would compare Lumen with a PyTorch nobody runs.
  const std::string openblas = "/usr/lib/x86_64-linux-gnu/openblas-pthread";
  if (std::system("/usr/bin/python3 -c 'import torch' 2> /dev/null") != 0 ||
      !std::filesystem::exists(openblas + "/libblas.so.3")) {
    std::fprintf(stderr, "trainer_bench: python3-torch or OpenBLAS is not "
                         "installed (apt-get install python3-torch "
                         "libopenblas0-pthread): no PyTorch figures\n");
    return std::nullopt;
  }
  auto cmd = "LD_LIBRARY_PATH=" + openblas +
             " OMP_NUM_THREADS=1 /usr/bin/python3 " + LUMEN_TORCH_SCRIPT + " " +
             mode + " " + std::to_string(epochs) + " " +
             std::to_string(s.limit) + " " + std::to_string(s.test_limit) +
             " " + std::to_string(s.lr) + " " + std::to_string(s.weight_decay) +
             " " + std::to_string(s.batch) + " " + s.model;
  std::fprintf(stderr, "  PyTorch %s, %zu epochs\n", mode, epochs);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe{::popen(cmd.c_str(), "r"),
                                             ::pclose};
  std::string text;
  char buf[4096];
  while (pipe && std::fgets(buf, sizeof buf, pipe.get()) != nullptr)
    text += buf;
  auto j = nlohmann::json::parse(text, nullptr, false);
  lumen::bench::verify(!j.is_discarded() && j.contains("seconds"),
                       std::string{"PyTorch's output: "} + text);
  run_figures out;
  out.seconds = j["seconds"].get<std::vector<double>>();
  out.accuracy = j["accuracy"].get<std::vector<double>>();
  return out;
}

/// Training seconds until the accuracy first reaches `goal`.
std::optional<double> time_to(const run_figures& r, double goal) {
  double t = 0;
  for (size_t e = 0; e < r.seconds.size(); ++e) {
    t += r.seconds[e];
    if (r.accuracy[e] >= goal)
      return t;
  }
  return std::nullopt;
}

size_t flag_number(const std::string& flag, size_t at) {
  try {
    return std::stoul(flag.substr(at));
  } catch (const std::exception&) {
    throw std::invalid_argument("'" + flag + "' takes a number");
  }
}

} // namespace

int main(int argc, char** argv) {
  lumen::util::use_huge_pages();
  auto opts = lumen::bench::parse_options(
    argc, argv,
    "trainer_bench: the data-parallel trainer on Fashion-MNIST beside a "
    "plain loop and PyTorch\n"
    "  --model=mlp|cnn    the model (mlp)\n"
    "  --epochs=E         epochs of the accuracy runs (20)\n"
    "  --timing-epochs=T  epochs of the epoch-time runs (3)\n"
    "  --batch=B          rows a step across each run's workers (64)\n"
    "  --torch=auto|off   PyTorch's figures where it is installed (auto)");
  settings s;
  try {
    for (auto& flag : opts.rest) {
      if (flag == "--model=mlp" || flag == "--model=cnn")
        s.model = flag.substr(8);
      else if (flag.rfind("--epochs=", 0) == 0)
        s.epochs = flag_number(flag, 9);
      else if (flag.rfind("--timing-epochs=", 0) == 0)
        s.timing_epochs = flag_number(flag, 16);
      else if (flag.rfind("--batch=", 0) == 0)
        s.batch = flag_number(flag, 8);
      else if (flag == "--torch=off" || flag == "--torch=auto")
        s.torch = flag == "--torch=auto";
      else
        throw std::invalid_argument("unknown flag '" + flag + "'; see --help");
    }
    if (s.epochs == 0 || s.timing_epochs == 0)
      throw std::invalid_argument("give at least one epoch");
    if (s.batch < 2 || s.batch % 2 != 0)
      throw std::invalid_argument("--batch takes an even number of rows (2 "
                                  "workers share it)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trainer_bench: %s\n", e.what());
    return 2;
  }
  if (opts.smoke) {
    s = {1, 1, 1024, 500, s.batch, s.lr, s.weight_decay, false, s.model};
  }
  lumen::init_options init;
  init.local_nodes = 2;
  lumen::init(init); // the local node processes serve from here
  char tmpl[] = "/tmp/lumen-trainer-bench-XXXXXX";
  std::string storage = ::mkdtemp(tmpl);
  std::vector<figure> figs;
  try {
    std::fprintf(stderr, "trainer_bench: %zu epochs with 2 workers\n",
                 s.epochs);
    // The first fit on this machine makes the data set's node-shared
    // block; the second maps it. Beside them, what loading it costs.
    auto load_start = std::chrono::steady_clock::now();
    ml::load_fashion_mnist(ml::split::train);
    ml::load_fashion_mnist(ml::split::test);
    double load = std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - load_start)
                    .count();
    bool cold = !data_set_mapped();
    // The ceiling before and after the runs it bounds: the machine's two
    // cores change speed from minute to minute (their placement on the
    // host), and one sample of it can miss the others' minutes.
    auto pair_before = plain_pair(s, s.timing_epochs);
    auto two = lumen_run(s, 2, s.epochs, true, storage);
    auto one = lumen_run(s, 1, s.timing_epochs, true, storage);
    auto serial = lumen_run(s, 2, s.timing_epochs, false, storage);
    auto plain = plain_loop(s, s.timing_epochs);
    auto pair = plain_pair(s, s.timing_epochs);
    std::optional<run_figures> torch1, torch2;
    if (s.torch) {
      torch1 = torch_run(s, "single", s.epochs);
      if (torch1)
        torch2 = torch_run(s, "ddp", s.timing_epochs);
    }

    figs.emplace_back("test_accuracy", "fraction",
                      std::vector<double>{two.accuracy.back()}, 2);
    figure loaded{"load_fashion_mnist_seconds", "s", {load}, 1};
    loaded.label = "load_fashion_mnist train+test";
    figure first{"fit_setup_seconds", "s", {two.setup}, 2};
    first.label = "fit_setup_seconds first fit";
    if (!cold)
      std::fprintf(stderr, "trainer_bench: another process of this machine "
                           "held Fashion-MNIST's node-shared block already: "
                           "the first fit did not make it\n");
    lumen::bench::compare(first, loaded);
    figure second{"fit_setup_seconds_second", "s", {one.setup}, 1};
    second.label = "fit_setup_seconds second fit";
    lumen::bench::compare(second, loaded);
    for (auto* f : {&loaded, &first, &second})
      figs.push_back(*f);
    // The MLP stops near 0.90, the CNN goes past 0.92.
    bool cnn = s.model == "cnn";
    auto goal = cnn ? 0.91 : 0.89;
    auto time_name =
      std::string{cnn ? "time_to_091_seconds" : "time_to_089_seconds"};
    auto ours_goal = time_to(two, goal);
    std::optional<double> torch_goal;
    if (torch1)
      torch_goal = time_to(*torch1, goal);
    if (torch_goal) {
      figs.emplace_back(time_name + "_torch", "s",
                        std::vector<double>{*torch_goal}, 1);
      figs.back().label = time_name + " torch 1 thread";
    }
    if (ours_goal) {
      figs.emplace_back(time_name, "s", std::vector<double>{*ours_goal}, 2);
      figs.back().label = time_name + " n=2";
      if (torch_goal)
        lumen::bench::compare(figs.back(), figs[figs.size() - 2]);
    } else {
      std::fprintf(stderr,
                   "trainer_bench: 2 workers did not reach %.2f "
                   "test accuracy in %zu epochs\n",
                   goal, s.epochs);
    }
    // Epoch times: the accuracy run's for 2 workers, its first epoch (the
    // one that warms the caches) left out where there are more.
    auto steady = [](std::vector<double> xs) {
      if (xs.size() > 1)
        xs.erase(xs.begin());
      return xs;
    };
    figure base{"epoch_seconds_baseline", "s", steady(plain), 1};
    base.label = "epoch_seconds plain loop";
    figure e1{"epoch_seconds", "s", steady(one.seconds), 1};
    e1.label = "epoch_seconds n=1";
    lumen::bench::compare(e1, base);
    figure e2{"epoch_seconds", "s", steady(two.seconds), 2};
    e2.label = "epoch_seconds n=2";
    lumen::bench::compare(e2, e1);
    auto ceiling_epochs = steady(pair_before);
    for (auto x : steady(pair))
      ceiling_epochs.push_back(x);
    figure ceiling{"epoch_seconds_ceiling", "s", ceiling_epochs, 2};
    ceiling.label = "epoch_seconds 2 plain loops side by side";
    lumen::bench::compare(ceiling, e1);
    // The goals' ratios, printed as such: two workers against their
    // ceiling.
    auto e2_ceiling = e2;
    e2_ceiling.label = "epoch_seconds n=2 vs 2 plain loops";
    lumen::bench::compare(e2_ceiling, ceiling);
    figs.push_back(base);
    figs.push_back(e1);
    figs.push_back(e2);
    figs.push_back(ceiling);
    figs.push_back(e2_ceiling);
    // Two workers' epoch against each PyTorch run there is.
    auto against = [&](const std::optional<run_figures>& torch,
                       const char* name, long n, const char* what) {
      if (!torch)
        return;
      figure theirs{name, "s", steady(torch->seconds), n};
      theirs.label = std::string{"epoch_seconds torch "} + what;
      figs.push_back(theirs);
      auto vs = e2;
      vs.label = std::string{"epoch_seconds n=2 vs torch "} + what;
      lumen::bench::compare(vs, theirs);
      figs.push_back(vs);
    };
    against(torch1, "epoch_seconds_torch_1thread", 1, "1 thread");
    if (torch1) {
      auto e1_torch = e1;
      e1_torch.label = "epoch_seconds n=1 vs torch 1 thread";
      lumen::bench::compare(e1_torch, figs[figs.size() - 2]);
      figs.push_back(e1_torch);
    }
    against(torch2, "epoch_seconds_torch_ddp2", 2, "DDP 2 procs");
    figure wait{"exposed_allreduce_seconds", "s", steady(two.exposed), 2};
    wait.label = "all-reduce waited per epoch";
    figure whole{"exposed_allreduce_seconds_no_overlap", "s",
                 steady(serial.exposed), 2};
    whole.label = "the same, no overlap";
    std::vector<double> hidden;
    for (auto x : wait.samples)
      hidden.push_back(1 - x / whole.median());
    figure overlap{"overlap_fraction", "fraction", hidden, 2};
    figs.push_back(wait);
    figs.push_back(whole);
    figs.push_back(overlap);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trainer_bench: %s\n", e.what());
    std::filesystem::remove_all(storage);
    lumen::shutdown();
    return 1;
  }
  std::filesystem::remove_all(storage);
  lumen::shutdown();
  lumen::bench::print("trainer_bench", figs, opts.json);
  return 0;
}
