#include "train/run_record.hpp"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <fstream>

#include <caf/result.hpp>
#include <caf/sec.hpp>

#include <lumen/errors.hpp>

namespace fs = std::filesystem;

namespace lumen::train::detail {

void run_state::keep(const metrics& m, const checkpoint& c) {
  auto path = dir / ("checkpoint_" + std::to_string(saved++));
  c.to_directory(path.string());
  latest = c;
  double score = 0;
  if (!run.checkpoint_score.empty()) {
    auto s = m.find(run.checkpoint_score);
    score = s == m.end() ? 0 : s->second;
  }
  bool better = best.empty() || run.checkpoint_score.empty() ||
                (run.score_max ? score > best_score : score < best_score);
  if (better) {
    best = path.string();
    best_score = score;
  }
  stored.emplace_back(path, score);
  // The latest `checkpoints_kept`, and the best, stay.
  while (run.checkpoints_kept > 0 && stored.size() > run.checkpoints_kept) {
    auto old = std::find_if(stored.begin(), stored.end() - 1,
                            [&](auto& s) { return s.first.string() != best; });
    if (old == stored.end() - 1)
      break;
    fs::remove_all(old->first);
    stored.erase(old);
  }
}

std::shared_ptr<run_state> open_run(const run_config& run,
                                    const std::string& dir) {
  auto st = std::make_shared<run_state>();
  st->run = run;
  st->dir = dir;
  std::error_code ec;
  fs::create_directories(st->dir, ec);
  auto probe = st->dir / ".lumen-write-test";
  if (ec || !std::ofstream{probe}) {
    throw error(
      "cannot write the run's files under " + st->dir.string() +
      (ec ? ": " + ec.message() : std::string{}) +
      "; give a storage path you can write (run_config::storage_path, "
      "--storage of lumen train)");
  }
  fs::remove(probe);
  // A run resumed into its folder numbers its checkpoints after those
  // there, leaving them be.
  for (auto& e : fs::directory_iterator{st->dir, ec}) {
    auto n = e.path().filename().string();
    if (is_partial_checkpoint(n))
      fs::remove_all(e.path(), ec);
    else if (n.rfind("checkpoint_", 0) == 0)
      st->saved = std::max(
        st->saved, size_t(std::strtoul(n.c_str() + 11, nullptr, 10)) + 1);
  }
  st->latest = run.resume_from;
  st->log = std::make_unique<metrics_log>(st->dir, run.metrics_files,
                                          run.resume_from.has_value());
  return st;
}

train_reporter::behavior_type reporter(train_reporter::pointer self,
                                       std::shared_ptr<run_state> st) {
  return {
    [=](report_atom, int32_t attempt, int32_t rank, const metrics& m, bool has,
        const checkpoint& c) -> caf::result<bool> {
      std::lock_guard<std::mutex> guard{st->mtx};
      bool zero = rank == 0;
      if (attempt != st->attempt ||
          (!zero && st->run.report_ranks != ranks::all))
        return true; // a failed attempt's straggler, or a rank not recorded
      try {
        if (has)
          st->keep(m, c);
        // Every row is written before its report returns: a killed
        // driver leaves them all. Those with a checkpoint are flushed to
        // the disk with it (and any written before them), so that a loop
        // reporting each step waits for no disk.
        st->log->add(m, rank, attempt, st->workers, has);
        if (!zero)
          return true;
        st->log->plot(false);
        st->history.push_back(m);
        if (st->run.on_report)
          st->run.on_report(m);
        if (has && st->grow && !st->regrouping) {
          st->regrouping = true;
          return false; // every rank stops here; the run regroups
        }
      } catch (const std::exception& e) {
        st->fatal = std::string{"the trainer could not store the run's "
                                "files: "} +
                    e.what();
        return caf::make_error(caf::sec::runtime_error, st->fatal);
      }
      static_cast<void>(self);
      return true;
    },
    [=](progress_atom, int32_t attempt, int32_t rank, const metrics& m) {
      std::lock_guard<std::mutex> guard{st->mtx};
      if (rank == 0 && attempt == st->attempt && st->run.on_progress)
        st->run.on_progress(m);
    },
  };
}

} // namespace lumen::train::detail
