#pragma once

// What a run's driver (trainer.cpp) keeps of it: the run's folder, its
// checkpoints (the latest few and the best), its metrics as they are
// reported, and the reporter actor the workers report to.

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lumen/train/trainer.hpp"

#include "train/metrics_log.hpp"
#include "train/train_wire.hpp"

namespace lumen::train::detail {

/// What the driver keeps of a run.
struct run_state {
  std::mutex mtx;
  run_config run;
  std::filesystem::path dir;
  int attempt = 0;
  std::vector<metrics> history;
  std::unique_ptr<metrics_log> log;
  std::optional<checkpoint> latest;
  std::vector<std::pair<std::filesystem::path, double>> stored; // oldest first
  std::string best;
  double best_score = 0;
  size_t saved = 0;
  // Why the run's files could not be stored: no restart mends that.
  std::string fatal;
  size_t workers = 0; // the attempt's, in each report's "workers"
  // An elastic run short of its most saw more live nodes: rank 0's next
  // report with a checkpoint ends the attempt there (once).
  bool grow = false;
  bool regrouping = false;

  /// Stores `c`, reported with `m`, as the run's next checkpoint; keeps
  /// the latest `checkpoints_kept` and the best.
  void keep(const metrics& m, const checkpoint& c);
};

/// The run's folder under `dir`, made and checked writable, its
/// checkpoints numbered after any a resumed run left there.
std::shared_ptr<run_state> open_run(const run_config& run,
                                    const std::string& dir);

/// The actor the workers report their metrics and checkpoints to.
train_reporter::behavior_type reporter(train_reporter::pointer self,
                                       std::shared_ptr<run_state> st);

} // namespace lumen::train::detail
