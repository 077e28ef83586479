#pragma once

// The checkpoint a `lumen train` command's --resume names, read and
// verified before any worker starts.

#include <filesystem>
#include <string>
#include <vector>

#include "lumen/ml/model_file.hpp"

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

} // namespace lumen::train::detail
