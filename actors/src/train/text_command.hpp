#pragma once

// `lumen train text`: its flags, checked as they are parsed, and the run
// (or, with --sample, text generated from a checkpoint).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lumen/train/text.hpp"

namespace lumen::train::detail {

struct text_flags {
  std::string data = fortunes_dir;
  size_t workers = 2;
  size_t steps = 2000;
  size_t eval_every = 200;
  size_t batch = 16;
  size_t length = 64;
  std::string model = "gpt";
  double lr = 1e-3;
  double weight_decay = 0;
  uint64_t seed = 1;
  std::string storage; // ~/lumen_results
  std::string name = "text";
  std::string resume; // a checkpoint to go on from, or "latest"
  std::string sample; // a checkpoint to sample from instead of training
  size_t chars = 400;
  double temperature = 0.8;
  std::string prompt;
};

/// The `text` subcommand of `app`, its flags parsed into `f`.
CLI::App* add_text_command(CLI::App& app, text_flags& f);

/// Trains, or samples with --sample; the cluster's flags in `rest`.
int run_text(const text_flags& f, const std::vector<std::string>& rest);

} // namespace lumen::train::detail
