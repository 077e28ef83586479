// A checkpoint's files on a disk: read from a folder, written into one
// whole or not at all.

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "lumen/ml/data.hpp"
#include "lumen/train/trainer.hpp"
#include "lumen/util/files.hpp"

#include "ml/durable_file.hpp"
#include "train/train_wire.hpp"

namespace fs = std::filesystem;

namespace lumen::train {

namespace {

/// Folders of checkpoints being written start so; a run's start clears
/// those its killed predecessors left.
const std::string partial_prefix = ".partial.";

} // namespace

bool detail::is_partial_checkpoint(const std::string& name) {
  return name.rfind(partial_prefix, 0) == 0;
}

checkpoint checkpoint::from_directory(const std::string& dir) {
  checkpoint c;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator{dir, ec}) {
    if (!entry.is_regular_file())
      continue;
    std::ifstream in{entry.path(), std::ios::binary};
    c.files[entry.path().filename().string()] =
      util::read_rest<std::vector<char>>(in);
    if (!in && !in.eof())
      throw error("cannot read checkpoint file " + entry.path().string());
  }
  if (ec)
    throw error("cannot read the checkpoint directory " + dir + ": " +
                ec.message());
  return c;
}

void checkpoint::to_directory(const std::string& dir) const {
  for (auto& [name, bytes] : files)
    if (name.empty() || name.find('/') != std::string::npos || name == "." ||
        name == "..")
      throw error("a checkpoint file named '" + name +
                  "'; names are plain file names");
  auto target = fs::path{dir}.lexically_normal();
  if (!target.has_filename())
    target = target.parent_path();
  std::error_code ec;
  bool fresh = !fs::exists(target, ec);
  // A new folder is filled beside its place, under a name no reader takes
  // for a checkpoint, and renamed once whole.
  auto place = fresh ? target.parent_path() /
                         (partial_prefix + target.filename().string() + "-" +
                          std::to_string(::getpid()))
                     : target;
  fs::create_directories(place, ec);
  if (ec)
    throw error("cannot make the checkpoint directory " + place.string() +
                ": " + ec.message());
  try {
    for (auto& [name, bytes] : files) {
      auto path = (place / name).string();
      if (fresh) {
        ml::detail::write_synced(path, bytes);
      } else {
        ml::detail::write_synced(path + ".partial", bytes);
        ml::detail::rename_synced(path + ".partial", path);
      }
    }
    if (fresh) {
      ml::detail::sync_directory(place.string());
      ml::detail::rename_synced(place.string(), target.string());
    }
  } catch (const ml::data_error& e) {
    if (fresh)
      fs::remove_all(place, ec);
    throw error(std::string{"cannot store the checkpoint "} + target.string() +
                ": " + e.what());
  }
}

} // namespace lumen::train
