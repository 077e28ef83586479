#pragma once

// The flags of `lumen train fashion-mnist`, each checked as it is parsed:
// a bad value exits 2 naming the flag and the fix.

#include <cstddef>
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "lumen/ml/data.hpp"
#include "lumen/train/fashion_mnist.hpp"

namespace lumen::train::detail {

struct train_flags {
  size_t workers = 2;
  size_t min_workers = 0; // 0: as many as --workers
  size_t max_workers = 0; // 0: as many as --workers
  size_t epochs = fashion_mnist_defaults::epochs;
  double lr = fashion_mnist_defaults::lr;
  double weight_decay = fashion_mnist_defaults::weight_decay;
  size_t batch = fashion_mnist_defaults::batch;
  uint64_t seed = 1;
  std::string model = "mlp";
  std::string sync = "ring"; // or "ps": through a server on rank 0
  std::string hidden = "256,128";
  size_t limit = 0;
  size_t test_limit = 0;
  std::string data = ml::fashion_mnist_dir;
  std::string storage; // ~/lumen_results
  std::string name = "fashion_mnist";
  std::string resume; // "latest": the run's last checkpoint
  int max_failures = 1;
  std::string progress = "auto";
};

/// Adds the flags to `app`, parsed into `f`.
void add_flags(CLI::App& app, train_flags& f);

} // namespace lumen::train::detail
