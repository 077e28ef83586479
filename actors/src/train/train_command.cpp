// `lumen train fashion-mnist`: the driver side of the Fashion-MNIST run.
// It parses the flags (the cluster's go to lumen::init), starts the
// workers' processes, checks what would fail late (the data set, the
// checkpoint to resume), runs the trainer, and shows its progress: a bar
// on a terminal, a line per epoch otherwise; the trainer writes the
// metrics beside the checkpoints, in this command's columns.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include <lumen/init.hpp>

#include "lumen/collective/collective.hpp"

#include "lumen/ml/data.hpp"
#include "lumen/ml/model_file.hpp"
#include "lumen/train/fashion_mnist.hpp"
#include "train/loop_checks.hpp"
#include "train/resume.hpp"
#include "train/text_command.hpp"
#include "train/train_flags.hpp"

namespace lumen::train {

namespace {

namespace fs = std::filesystem;
using detail::add_flags;
using detail::clock_text;
using detail::train_flags;
using clock_type = std::chrono::steady_clock;

/// Debian's Fashion-MNIST training set (a --data of another size is
/// checked by the loop).
constexpr size_t fashion_mnist_train_rows = 60000;

/// metrics.csv's columns: the loop's epoch report, in this order (its
/// users read them by position).
const std::vector<std::string> columns{"epoch",
                                       "loss",
                                       "test_loss",
                                       "test_accuracy",
                                       "epoch_seconds",
                                       "samples_per_second",
                                       "exposed_allreduce_seconds",
                                       "drift",
                                       "workers"};

/// What the user sees while it trains.
class progress_view {
public:
  progress_view(bool bar, size_t first_epoch)
    : bar_(bar)
    , first_(first_epoch) {}

  void step(const metrics& m) {
    if (!bar_)
      return;
    auto epoch = m.at("epoch"), epochs = m.at("epochs");
    auto step = m.at("step"), steps = m.at("steps");
    auto done = (epoch - 1 - double(first_)) * steps + step;
    auto left = (epochs - epoch) * steps + steps - step;
    std::chrono::duration<double> took = clock_type::now() - start_;
    const int width = 24;
    auto filled = int(width * step / steps);
    std::string bar(size_t(filled), '#');
    bar.resize(width, '.');
    std::printf("\r\033[Kepoch %.0f/%.0f [%s] %.0f/%.0f  loss %.4f  %.0f "
                "samples/s  ETA %s",
                epoch, epochs, bar.c_str(), step, steps, m.at("loss"),
                m.at("samples_per_second"),
                clock_text(took.count() / done * left).c_str());
    std::fflush(stdout);
  }

  void epoch(const metrics& m, size_t epochs) {
    std::printf("%sepoch %3.0f/%zu  loss %.4f  test loss %.4f  test accuracy "
                "%.4f  %.2f s  %.0f samples/s  all-reduce waited %.3f s\n",
                bar_ ? "\r\033[K" : "", m.at("epoch"), epochs, m.at("loss"),
                m.at("test_loss"), m.at("test_accuracy"), m.at("epoch_seconds"),
                m.at("samples_per_second"), m.at("exposed_allreduce_seconds"));
    std::fflush(stdout);
  }

private:
  bool bar_;
  size_t first_;
  clock_type::time_point start_ = clock_type::now();
};

int fashion_mnist(const train_flags& f, const std::vector<std::string>& rest) {
  if (f.min_workers > f.workers)
    throw usage_error("--min-workers " + std::to_string(f.min_workers) +
                      " is above --workers " + std::to_string(f.workers) +
                      "; give at most as many");
  auto most = std::max(f.max_workers, f.workers);
  if (f.max_workers > 0 && f.max_workers < f.workers)
    throw usage_error("--max-workers " + std::to_string(f.max_workers) +
                      " is below --workers " + std::to_string(f.workers) +
                      "; give at least as many");
  if (f.max_workers > f.workers && f.min_workers == 0)
    throw usage_error("--max-workers " + std::to_string(f.max_workers) +
                      " makes the run elastic: give --min-workers too (the "
                      "fewest it goes on with, e.g. " +
                      std::to_string(f.workers) + ")");
  // Every worker needs a batch of its own, of training and of test rows
  // (the loop finds out too, but only once the cluster is up).
  auto images = f.limit > 0
                  ? std::min<size_t>(f.limit, fashion_mnist_train_rows)
                  : fashion_mnist_train_rows;
  if (images / f.workers < f.batch)
    throw usage_error(std::to_string(images) +
                      " training images (--limit) for " +
                      std::to_string(f.workers) + " workers (--workers) of " +
                      std::to_string(f.batch) +
                      " rows a step (--batch): not one batch each; give a "
                      "larger --limit or a smaller --batch");
  if (f.test_limit > 0 && f.test_limit < f.workers)
    throw usage_error("--test-limit " + std::to_string(f.test_limit) + " for " +
                      std::to_string(f.workers) +
                      " workers: each tests on a share; give at least one "
                      "image a worker, or 0 for all");
  auto opts = parse_init_flags(rest);
  if (opts.address.empty())
    opts.local_nodes = int(f.workers);
  // Before init, so that the local nodes (this program again) do it too:
  // a stalled group's records go next to the run.
  run_config here;
  here.name = f.name;
  here.storage_path = f.storage;
  collective::set_flight_records_dir(run_dir(here));
  lumen::init(opts); // a local node process serves from here on
  struct stop_at_exit {
    ~stop_at_exit() {
      lumen::shutdown();
    }
  } stop;
  // What would fail only in the workers, found before they start.
  ml::load_fashion_mnist(ml::split::test, f.data);
  auto model = fashion_mnist_model(f.model, f.hidden);
  run_config cfg;
  cfg.name = f.name;
  cfg.storage_path = f.storage;
  cfg.failure.max_failures = f.max_failures;
  cfg.checkpoint_score = "test_accuracy";
  cfg.metrics_files.columns = columns;
  cfg.metrics_files.plotted = {"loss", "test_loss", "test_accuracy"};
  cfg.metrics_files.title = "Fashion-MNIST, " + std::to_string(f.workers) +
                            (f.workers == 1 ? " worker" : " workers");
  fs::path run = run_dir(cfg);
  size_t first = 0;
  if (!f.resume.empty()) {
    first = detail::resume_run(cfg, f.resume, run, model, "epoch", f.epochs,
                               "lumen train fashion-mnist")
              .second;
  }
  bool bar =
    f.progress == "bar" || (f.progress == "auto" && ::isatty(STDOUT_FILENO) &&
                            std::getenv("TERM") != nullptr &&
                            std::string{std::getenv("TERM")} != "dumb");
  progress_view view{bar, first};
  cfg.on_progress = [&](const metrics& m) { view.step(m); };
  cfg.on_restart = [&](const std::string& why, size_t workers) {
    std::printf("%sworker lost (%s); going on from the last checkpoint with "
                "%zu %s\n",
                bar ? "\r\033[K" : "", why.c_str(), workers,
                workers == 1 ? "worker" : "workers");
    std::fflush(stdout);
  };
  cfg.on_grow = [&](size_t workers) {
    std::printf("%snodes joined; going on from the last checkpoint with %zu "
                "workers\n",
                bar ? "\r\033[K" : "", workers);
    std::fflush(stdout);
  };
  cfg.on_report = [&](const metrics& m) { view.epoch(m, f.epochs); };
  auto net = ml::make_model(model);
  auto elastic =
    f.min_workers > 0 && (f.min_workers < f.workers || most > f.workers)
      ? " (elastic: " + std::to_string(f.min_workers) + " to " +
          std::to_string(most) + ")"
      : std::string{};
  std::printf(
    "training %s (%zu parameters) on Fashion-MNIST: %zu workers%s%s, "
    "%zu epochs, batch %s\n",
    net->name().c_str(), net->num_params(), f.workers, elastic.c_str(),
    f.sync == "ps" && f.workers > 1 ? " through a parameter server" : "",
    f.epochs,
    most > f.workers ? (std::to_string(f.batch * most) +
                        " in all, shared by the workers there are")
                         .c_str()
                     : (std::to_string(f.batch) + " per worker").c_str());
  data_parallel_trainer trainer{fashion_mnist_loop,
                                {{"epochs", f.epochs},
                                 {"lr", f.lr},
                                 {"weight_decay", f.weight_decay},
                                 {"batch", f.batch},
                                 {"seed", double(f.seed)},
                                 {"model", f.model},
                                 {"sync", f.sync},
                                 {"hidden", f.hidden},
                                 {"limit", f.limit},
                                 {"test_limit", f.test_limit},
                                 {"data", f.data},
                                 {"planned_workers", most}},
                                {most, f.min_workers},
                                cfg};
  train_result result;
  try {
    result = trainer.fit();
  } catch (const training_error& e) {
    // The trainer's words, in the flags of this command.
    std::string why = "training stopped";
    if (e.restarts() > 0)
      why += " after " + std::to_string(e.restarts()) + " restarts";
    why += ": " + e.cause();
    if (e.restartable() && e.restarts() == 0)
      why += "; --max-failures N allows N restarts from the last checkpoint";
    if (!e.last_checkpoint().empty())
      why += "\nthe last good checkpoint: " + e.last_checkpoint() +
             " (go on from it with --resume " + e.last_checkpoint() + ")";
    throw error(why);
  }
  std::printf(
    "test accuracy %.4f after %.0f epochs%s\n"
    "best checkpoint: %s/model.safetensors\n"
    "metrics: %s, plot: %s\n",
    result.last.at("test_accuracy"), result.last.at("epoch"),
    result.failures > 0
      ? (" (" + std::to_string(result.failures) + " restarts)").c_str()
      : "",
    result.best_checkpoint.c_str(), (run / "metrics.csv").c_str(),
    (run / "metrics.svg").c_str());
  std::fflush(stdout);
  return 0;
}

int train_main(int argc, char** argv) {
  CLI::App app{"Train a model data-parallel on an embedded cluster of local "
               "processes, or on a cluster's nodes (--address).",
               "lumen train"};
  app.require_subcommand(1);
  train_flags f;
  auto fm = app.add_subcommand(
    "fashion-mnist", "an MLP or a CNN on Debian's Fashion-MNIST (60,000 "
                     "training images, 10,000 test images)");
  add_flags(*fm, f);
  fm->allow_extras(); // the cluster's flags, for lumen::init
  fm->footer(init_flags_help());
  detail::text_flags tf;
  auto text = detail::add_text_command(app, tf);
  // Which subcommand the help and the hint name.
  auto sub = argc > 1 && std::string{argv[1]} == text->get_name() ? text : fm;
  auto hint = "Run `lumen train " + sub->get_name() + " --help` for the flags.";
  if (auto code = parse_verb(
        "train", [&] { app.parse(argc, argv); },
        [&] {
          return argc > 1 && std::string{argv[1]} == sub->get_name()
                   ? sub->help()
                   : app.help();
        },
        hint))
    return *code;
  try {
    if (text->parsed())
      return detail::run_text(tf, text->remaining());
    // CLI11 checks no empty value of a flag whose value may be left out.
    if (fm->count("--resume") > 0 && f.resume.empty())
      throw usage_error("--resume: an empty path; give a checkpoint's folder "
                        "or file, or --resume alone for the run's latest");
    return fashion_mnist(f, fm->remaining());
  } catch (const usage_error& e) {
    std::cerr << "lumen train: " << e.what() << "\n" << hint << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "lumen train: " << e.what() << "\n";
    return 1;
  }
}

} // namespace

cli_verb train_verb() {
  static_cast<void>(detail::fashion_mnist_registered());
  static_cast<void>(detail::text_registered());
  return {"train",
          "train a model data-parallel: `lumen train fashion-mnist "
          "--workers 2`, `lumen train text`",
          train_main};
}

} // namespace lumen::train
