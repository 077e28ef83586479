#pragma once

// The checkpoint a `lumen train` command's --resume names, read and
// verified before any worker starts.

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "lumen/ml/model_file.hpp"
#include "lumen/train/trainer.hpp"

namespace lumen::train::detail {

/// A checkpoint's model file, read and verified.
struct resume_point {
  std::filesystem::path path;
  std::vector<char> bytes;
  ml::model_file file;
};

/// The checkpoint `path` names: a checkpoint's folder, or its file.
/// "latest" is the run `run`'s highest-numbered checkpoint_N that
/// verifies; the ones above it are named with why they were skipped. The
/// file must carry `done_key` ("epochs_done") in its metadata, as the
/// checkpoints of `command` ("lumen train fashion-mnist") do. Throws
/// `data_error` or `usage_error` naming the file and the fix.
resume_point checkpoint_to_resume(const std::string& path,
                                  const std::filesystem::path& run,
                                  const std::string& done_key,
                                  const std::string& command);

/// Sets `cfg` to go on from the checkpoint `path` names (as above, of
/// `run`): its model checked against `model`, its `unit`s done ("epoch":
/// "epochs_done" in its metadata) below `total`, the run's metrics rows
/// after them to come again; says so on stdout. `check`, if set, is
/// called on the file first (its throw stops it). Returns the checkpoint
/// and the count done. Throws as checkpoint_to_resume and
/// check_same_model, and `usage_error` for a checkpoint at `total`.
std::pair<resume_point, size_t>
resume_run(run_config& cfg, const std::string& path,
           const std::filesystem::path& run, const ml::model_spec& model,
           const std::string& unit, size_t total, const std::string& command,
           const std::function<void(const ml::model_file&)>& check = {});

} // namespace lumen::train::detail
