#include "train/text_command.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <lumen/init.hpp>

#include "lumen/collective/collective.hpp"

#include "lumen/train/fashion_mnist.hpp"
#include "train/loop_checks.hpp"
#include "train/resume.hpp"

namespace lumen::train::detail {

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> columns{
  "step",    "loss",    "val_loss",         "train_bpc",
  "val_bpc", "seconds", "chars_per_second", "exposed_allreduce_seconds"};

int sample(const text_flags& f) {
  auto path = fs::is_directory(f.sample)
                ? (fs::path{f.sample} / model_file_name).string()
                : f.sample;
  std::cout << sample_text(path, f.prompt, f.chars, f.temperature, f.seed)
            << "\n";
  return 0;
}

} // namespace

CLI::App* add_text_command(CLI::App& app, text_flags& f) {
  auto* t = app.add_subcommand(
    "text", "a character-level GPT on a text file or a folder of them "
            "(default: Debian's fortunes), or text sampled from its "
            "checkpoint (--sample)");
  t->add_option("--data", f.data, "a text file, or a folder of them")
    ->capture_default_str();
  t->add_option("--workers", f.workers, "workers, a process each")
    ->check(CLI::Range(1, 64))
    ->capture_default_str();
  t->add_option("--steps", f.steps, "steps in all")
    ->check(CLI::Range(1, 10000000))
    ->capture_default_str();
  t->add_option("--eval-every", f.eval_every,
                "steps between validations and checkpoints")
    ->check(CLI::Range(1, 10000000))
    ->capture_default_str();
  t->add_option("--batch", f.batch, "windows a step and worker")
    ->check(CLI::Range(1, 4096))
    ->capture_default_str();
  t->add_option("--length", f.length, "tokens (bytes) a window")
    ->check(CLI::Range(2, 4096))
    ->capture_default_str();
  t->add_option("--model", f.model,
                "gpt (4 blocks, 4 heads, 128 wide), gpt-wide (4 blocks, 8 "
                "heads, 256 wide, dropout 0.1), or layers of your own: "
                "embed(V,D), res(...), norm, attn(H), dense(N), gelu, relu, "
                "dropout(P) joined by '-', V the vocabulary's size, ending "
                "in dense(V)")
    ->capture_default_str();
  t->add_option("--lr", f.lr, "Adam's learning rate")
    ->check(CLI::Range(1e-7, 1.0))
    ->capture_default_str();
  t->add_option("--weight-decay", f.weight_decay,
                "decoupled weight decay, as AdamW's: each step the matrices "
                "shrink by this much of the learning rate")
    ->check(CLI::Range(0.0, 10.0))
    ->capture_default_str();
  t->add_option("--seed", f.seed, "seeds the weights, windows and samples")
    ->check(CLI::NonNegativeNumber)
    ->capture_default_str();
  t->add_option("--storage", f.storage,
                "where runs go (default ~/lumen_results)")
    ->type_name("DIR");
  t->add_option("--name", f.name, "the run's name")->capture_default_str();
  t->add_option("--resume", f.resume,
                "go on from this checkpoint (its folder or model.safetensors, "
                "or \"latest\": the run's last) to --steps, as the run "
                "would have gone on")
    ->type_name("PATH");
  t->add_option("--sample", f.sample,
                "print text sampled from this checkpoint (its folder or "
                "model.safetensors) instead of training")
    ->type_name("PATH");
  t->add_option("--chars", f.chars, "characters to sample")
    ->check(CLI::Range(1, 1000000))
    ->capture_default_str();
  t->add_option("--temperature", f.temperature,
                "sampling temperature: lower is surer, higher wilder")
    ->check(CLI::Range(0.01, 10.0))
    ->capture_default_str();
  t->add_option("--prompt", f.prompt, "the text to go on from");
  t->allow_extras(); // the cluster's flags, for lumen::init
  t->footer(init_flags_help());
  return t;
}

int run_text(const text_flags& f, const std::vector<std::string>& rest) {
  if (!f.sample.empty())
    return sample(f);
  // What would fail only in the workers, found before they start.
  auto text = ml::load_text(f.data);
  auto model = text_model(f.model, text.vocab.size(), f.length);
  auto opts = parse_init_flags(rest);
  if (opts.address.empty())
    opts.local_nodes = int(f.workers);
  // Before init, so that the local nodes (this program again) do it too:
  // a stalled group's records go next to the run.
  run_config here;
  here.name = f.name;
  here.storage_path = f.storage;
  collective::set_flight_records_dir(run_dir(here));
  lumen::init(opts);
  struct stop_at_exit {
    ~stop_at_exit() {
      lumen::shutdown();
    }
  } stop;
  run_config cfg;
  cfg.name = f.name;
  cfg.storage_path = f.storage;
  cfg.checkpoint_score = "val_bpc";
  cfg.score_max = false;
  cfg.metrics_files.columns = columns;
  cfg.metrics_files.plotted = {"train_bpc", "val_bpc"};
  cfg.metrics_files.title = "bits per character, " + std::to_string(f.workers) +
                            (f.workers == 1 ? " worker" : " workers");
  auto run = fs::path{run_dir(cfg)};
  size_t first = 0;
  if (!f.resume.empty()) {
    first =
      resume_run(cfg, f.resume, run, model, "step", f.steps, "lumen train text",
                 [&](const ml::model_file& file) {
                   check_resumable_text(file, text.vocab);
                 })
        .second;
  }
  auto net = ml::make_model(model);
  std::printf("training %s (%zu parameters) on %s (%zu bytes, %zu distinct): "
              "%zu workers, %zu steps of %zu windows of %zu a worker\n",
              net->name().c_str(), net->num_params(), f.data.c_str(),
              text.tokens.size(), text.vocab.size(), f.workers, f.steps,
              f.batch, f.length);
  std::fflush(stdout);
  auto start = std::chrono::steady_clock::now();
  cfg.on_report = [&](const metrics& m) {
    std::chrono::duration<double> took =
      std::chrono::steady_clock::now() - start;
    auto step = m.at("step");
    // The time left at the pace since the start, the cluster's start in it.
    auto left = (double(f.steps) - step) * took.count() /
                std::max(1.0, step - double(first));
    std::printf("step %6.0f/%zu  train %.3f bpc  validation %.3f bpc  "
                "%.1f s  %.0f chars/s  all-reduce waited %.2f s%s\n",
                step, f.steps, m.at("train_bpc"), m.at("val_bpc"),
                m.at("seconds"), m.at("chars_per_second"),
                m.at("exposed_allreduce_seconds"),
                left > 0 ? ("  ETA " + clock_text(left)).c_str() : "");
    std::fflush(stdout);
  };
  data_parallel_trainer trainer{text_loop,
                                {{"data", f.data},
                                 {"model", f.model},
                                 {"length", f.length},
                                 {"batch", f.batch},
                                 {"steps", f.steps},
                                 {"eval_every", f.eval_every},
                                 {"lr", f.lr},
                                 {"weight_decay", f.weight_decay},
                                 {"seed", double(f.seed)}},
                                {f.workers},
                                cfg};
  auto result = trainer.fit();
  std::printf("validation %.3f bits per character after %.0f steps\n"
              "best checkpoint: %s/model.safetensors\n"
              "metrics: %s, plot: %s\n"
              "sample it: lumen train text --sample %s\n",
              result.last.at("val_bpc"), result.last.at("step"),
              result.best_checkpoint.c_str(), (run / "metrics.csv").c_str(),
              (run / "metrics.svg").c_str(), result.best_checkpoint.c_str());
  return 0;
}

} // namespace lumen::train::detail
