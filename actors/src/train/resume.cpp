#include "train/resume.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "lumen/errors.hpp"
#include "lumen/ml/data.hpp"
#include "lumen/train/fashion_mnist.hpp"
#include "lumen/util/files.hpp"

namespace lumen::train::detail {

namespace fs = std::filesystem;

namespace {

resume_point read_checkpoint(const fs::path& path, const std::string& done_key,
                             const std::string& command) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    throw ml::data_error(path.string() +
                           ": cannot be opened; give a checkpoint's folder "
                           "or its model.safetensors",
                         errc::missing_file);
  resume_point p{path, util::read_rest<std::vector<char>>(in), {}};
  p.file = ml::parse_model_file(p.bytes, path.string());
  if (p.file.metadata.count(done_key) == 0)
    throw ml::data_error(path.string() + ": no " + done_key +
                           " in its metadata; it is not a checkpoint of " +
                           command,
                         errc::bad_file);
  return p;
}

} // namespace

resume_point checkpoint_to_resume(const std::string& path, const fs::path& run,
                                  const std::string& done_key,
                                  const std::string& command) {
  if (path != "latest")
    return read_checkpoint(fs::is_directory(path)
                             ? fs::path{path} / model_file_name
                             : fs::path{path},
                           done_key, command);
  std::vector<std::pair<long, fs::path>> found;
  std::error_code ec;
  for (auto& e : fs::directory_iterator{run, ec}) {
    auto n = e.path().filename().string();
    if (n.rfind("checkpoint_", 0) != 0 || !e.is_directory())
      continue;
    char* end = nullptr;
    auto k = std::strtol(n.c_str() + 11, &end, 10);
    if (*end == '\0')
      found.emplace_back(k, e.path());
  }
  if (found.empty())
    throw usage_error("--resume: no checkpoint in " + run.string() +
                      "; give the checkpoint's folder or file");
  std::sort(found.rbegin(), found.rend());
  for (auto& [k, dir] : found) {
    try {
      return read_checkpoint(dir / model_file_name, done_key, command);
    } catch (const ml::data_error& e) {
      std::printf("skipping %s: %s\n", dir.c_str(), e.what());
    }
  }
  throw ml::data_error("--resume: none of the " + std::to_string(found.size()) +
                         " checkpoints in " + run.string() +
                         " can be read (each is named above with why)",
                       errc::bad_file);
}

std::pair<resume_point, size_t>
resume_run(run_config& cfg, const std::string& path, const fs::path& run,
           const ml::model_spec& model, const std::string& unit, size_t total,
           const std::string& command,
           const std::function<void(const ml::model_file&)>& check) {
  auto done_key = unit + "s_done";
  auto p = checkpoint_to_resume(path, run, done_key, command);
  check_same_model(p.file.spec, model);
  if (check)
    check(p.file);
  size_t first = std::stoul(p.file.metadata.at(done_key));
  if (first >= total)
    throw usage_error("the checkpoint has " + std::to_string(first) + " " +
                      unit + "s done already; ask for more with --" + unit +
                      "s");
  // The loop finds the model as model.safetensors, whatever its name.
  cfg.resume_from.emplace();
  cfg.resume_from->files[model_file_name] = p.bytes;
  // The rows after the checkpoint's step or epoch come again.
  cfg.metrics_files.keep_on_resume = [first, unit](const metrics& m) {
    auto at = m.find(unit);
    return at != m.end() && at->second <= double(first);
  };
  std::printf("resuming from %s (%zu %ss done)\n", p.path.c_str(), first,
              unit.c_str());
  return {std::move(p), first};
}

} // namespace lumen::train::detail
