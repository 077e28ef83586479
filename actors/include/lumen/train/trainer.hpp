#pragma once

// A data-parallel trainer in the spirit of Ray Train: a train loop that
// every worker runs, each in a process of its own (a node of the cluster:
// the local node processes of `--local-nodes`, or nodes joined with
// `--address`), its rank and the world in its context, the workers one
// collective group for their all-reduces. Rank 0's reports are the run's:
// each is acknowledged once the trainer has recorded it (and stored its
// checkpoint under the run's storage path), so nothing reported is lost.
// The run's folder holds, beside the checkpoints, every report recorded,
// whatever the loop: metrics.csv (a row each), result.json (a JSON object
// a line, as Ray Train's) and metrics.svg (the metrics plotted); rank 0's,
// or every rank's with run_config::report_ranks.
// A worker that fails (its loop throws, its process is killed) ends the
// attempt; the trainer starts the group again from the last checkpoint, up
// to `max_failures` times, on the nodes alive then.
//
//   void loop(const lumen::train::loop_config& cfg) {
//     auto ctx = lumen::train::get_context();
//     lumen::train::bucketed_allreduce sync{net, ctx.group};
//     if (auto ckpt = lumen::train::get_checkpoint()) ... resume from it
//     for (...) lumen::train::report({{"loss", loss}}, checkpoint);
//   }
//   LUMEN_TRAIN_LOOP(loop);
//
//   lumen::train::data_parallel_trainer trainer{"loop", cfg, {2}, run};
//   auto result = trainer.fit();

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/meta/type_name.hpp>

#include <lumen/remote.hpp>

namespace lumen::train {

/// A setting a loop is given: a number (a hyperparameter) or a text (a
/// path, a name).
struct config_value {
  double number = 0;
  std::string text;
  bool is_text = false;

  config_value() = default;
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  config_value(T x) // NOLINT: {"lr", 0.05} reads as it should
    : number(static_cast<double>(x)) {}
  config_value(std::string s) // NOLINT: {"data", dir} too
    : text(std::move(s))
    , is_text(true) {}
  config_value(const char* s) // NOLINT
    : config_value(std::string{s}) {}
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, config_value& x) {
  return f(caf::meta::type_name("lumen::train::config_value"), x.number, x.text,
           x.is_text);
}

/// What a loop is given (Ray Train's train_loop_config), and the numbers
/// it reports.
using loop_config = std::map<std::string, config_value>;
using metrics = std::map<std::string, double>;

/// The number `cfg[key]`, or `fallback` if it is not there. Throws
/// `usage_error` if it is a text.
double value_or(const loop_config& cfg, const std::string& key,
                double fallback);

/// The text `cfg[key]`, or `fallback` if it is not there. Throws
/// `usage_error` if it is a number.
std::string text_or(const loop_config& cfg, const std::string& key,
                    const std::string& fallback);

/// A checkpoint: the files of a directory, held in memory so that it
/// crosses processes and machines with the report that carries it.
struct checkpoint {
  std::map<std::string, std::vector<char>> files;

  /// The regular files of `dir` (not its subdirectories). Throws `error`
  /// for a directory that cannot be read.
  static checkpoint from_directory(const std::string& dir);

  /// Writes the files into `dir`, each flushed to the disk. A `dir` that
  /// is new appears whole or not at all (the files are written into a
  /// folder beside it, renamed once complete); into one that exists each
  /// file is put whole. Throws `error` naming the file and the system's
  /// reason ("No space left on device") if it cannot.
  void to_directory(const std::string& dir) const;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint& x) {
  return f(caf::meta::type_name("lumen::train::checkpoint"), x.files);
}

/// Who a worker is, inside its train loop.
struct train_context {
  int world_rank = 0;
  int world_size = 1;
  int local_rank = 0; // among the workers of its machine
  std::string group;  // the workers' collective group, joined already
  int attempt = 0;    // 0, then 1 after the first restart, ...
};

/// The calling train loop's context. Throws `usage_error` outside one.
const train_context& get_context();

/// The checkpoint to resume from: the last one reported before a
/// restart, or none in a fresh run.
const std::optional<checkpoint>& get_checkpoint();

/// Reports this worker's metrics (and rank 0's checkpoint, if given; the
/// other ranks' are dropped, as theirs equal rank 0's). Returns once the
/// trainer has recorded it (in the run folder's metrics files if the
/// rank's reports are kept there). Throws `usage_error` outside a train loop,
/// `error` if the trainer is gone.
void report(const metrics& m,
            const std::optional<checkpoint>& ckpt = std::nullopt);

/// Tells the driver how far this worker got (rank 0's go to
/// run_config::on_progress; the others' are dropped), without waiting:
/// call it as often as a progress bar should move. Throws `usage_error`
/// outside a train loop.
void report_progress(const metrics& m);

/// A train loop, registered under its name so that every process of the
/// cluster can run it (each is the same program, or loads it with
/// --code-path).
using train_loop = std::function<void(const loop_config&)>;
bool register_train_loop(const std::string& name, train_loop loop);

#define LUMEN_TRAIN_LOOP(fn)                                                   \
  static const bool LUMEN_PP_CAT(lumen_train_loop_, __COUNTER__) =             \
    ::lumen::train::register_train_loop(#fn, fn)

struct scaling_config {
  size_t num_workers = 2;
  // Elastic training, as Ray Train's num_workers=(min, max) and torchrun's
  // --nnodes=MIN:MAX: an attempt runs on as many workers as there are live
  // nodes, up to num_workers and down to min_workers. A group that lost a
  // machine goes on without it from the last checkpoint; one short of
  // num_workers grows when a node joins: at rank 0's next report with a
  // checkpoint every rank stops (report() does it; each rank must report
  // at the same points) and the run goes on from that checkpoint with a
  // worker on the new node too. Neither counts as a failure of
  // failure_config. The loop sees the new world size in get_context(),
  // and shares its data and batch anew (the Fashion-MNIST loop keeps the
  // global batch, and so the learning rate, as planned). 0 keeps the
  // group at num_workers.
  size_t min_workers = 0;
};

struct failure_config {
  int max_failures = 0; // restarts allowed before fit gives up
};

/// Whose reports the run folder's metrics files hold.
enum class ranks {
  zero, // rank 0's, the run's
  all,  // every rank's, a row each, tagged with its rank
};

/// How the run folder's metrics.csv and metrics.svg are laid out;
/// result.json holds every field of every report whatever this says.
struct metrics_layout {
  // The CSV's columns, in order: metrics, and the trainer's own fields
  // (rank, training_iteration, time_total_s, attempt, workers). Empty: every
  // metric reported, in the order they first appear (a new one rewrites
  // the file with its column), then the trainer's fields.
  std::vector<std::string> columns;
  // The metrics the plot shows, against epoch if the loop reports it,
  // else step if it reports that, else training_iteration. Empty: every
  // metric but the one they are shown against.
  std::vector<std::string> plotted;
  std::string title; // the plot's ("": the run's name)
  // Which rows written before a run resumed (run_config::resume_from)
  // into the same folder it keeps, such as those up to the checkpoint's
  // epoch (empty: all of them).
  std::function<bool(const metrics&)> keep_on_resume;
};

struct run_config {
  std::string name = "lumen_train";
  // The run's files go to <storage_path>/<name>; "" is ~/lumen_results,
  // as Ray's ~/ray_results.
  std::string storage_path;
  failure_config failure;
  size_t checkpoints_kept = 2;  // the latest ones, and the best (0: all)
  std::string checkpoint_score; // a metric ranking checkpoints ("": latest)
  bool score_max = true;        // higher is better
  // Whose reports the run folder's metrics.csv, result.json and
  // metrics.svg hold. on_report and train_result::history hold rank 0's
  // either way.
  ranks report_ranks = ranks::zero;
  metrics_layout metrics_files;
  // Called in the driver with each of rank 0's reports, once it is
  // recorded: progress to print, a plot to grow.
  std::function<void(const metrics&)> on_report;
  // Called in the driver with rank 0's report_progress metrics.
  std::function<void(const metrics&)> on_progress;
  // Called in the driver as a failed attempt is restarted: why it failed,
  // and the workers of the next attempt.
  std::function<void(const std::string& why, size_t workers)> on_restart;
  // Called in the driver as an elastic run regroups with more workers
  // (nodes joined) from the checkpoint it just stored: their number.
  std::function<void(size_t workers)> on_grow;
  // A checkpoint to start from (get_checkpoint() in the loop), as Ray
  // Train's resume_from_checkpoint.
  std::optional<checkpoint> resume_from;
};

/// Where a run's files go: <storage_path>/<name>, ~/lumen_results/<name>
/// for an empty storage_path.
std::string run_dir(const run_config& run);

/// fit() gave up: a worker failed in a way a restart cannot mend (bad
/// data, a full disk, a diverged run, an exception of the loop's own), or
/// lost workers once more than max_failures allows. what() says why, on
/// which rank and node, and where the last checkpoint is.
class training_error : public error {
public:
  training_error(const std::string& what, std::string cause, bool restartable,
                 int restarts, std::string last_checkpoint)
    : error(what)
    , cause_(std::move(cause))
    , restartable_(restartable)
    , restarts_(restarts)
    , last_checkpoint_(std::move(last_checkpoint)) {}

  /// The failure itself: "rank 1 on node-2: ...".
  const std::string& cause() const noexcept {
    return cause_;
  }
  /// True if a lost worker ended it (more restarts would have gone on).
  bool restartable() const noexcept {
    return restartable_;
  }
  /// Restarts taken before it.
  int restarts() const noexcept {
    return restarts_;
  }
  /// The folder of the last checkpoint stored ("" if none).
  const std::string& last_checkpoint() const noexcept {
    return last_checkpoint_;
  }

private:
  std::string cause_;
  bool restartable_;
  int restarts_;
  std::string last_checkpoint_;
};

struct train_result {
  metrics last;                    // rank 0's last report
  std::vector<metrics> history;    // rank 0's reports, restarts included
  std::string last_checkpoint;     // directories under the run's path
  std::string best_checkpoint;     // ("" if none was reported)
  int failures = 0;                // restarts it took
  std::vector<std::string> errors; // why each failed attempt ended
};

class data_parallel_trainer {
public:
  /// Runs the loop registered as `loop` (LUMEN_TRAIN_LOOP) with `cfg` on
  /// `scaling.num_workers` workers. Throws `usage_error` for an unknown
  /// loop, no workers, or min_workers above num_workers.
  data_parallel_trainer(std::string loop, loop_config cfg,
                        scaling_config scaling, run_config run);

  /// Trains until every worker's loop returns. Only a lost worker (its
  /// process or node gone, and with it its collective peers) is
  /// restarted, up to `max_failures` times. Throws `training_error` for a
  /// failure a restart cannot mend (at once) and once the restarts are
  /// spent; `error` if the cluster has too few live nodes for an attempt
  /// (num_workers, or min_workers if set), or the storage path cannot be
  /// written.
  train_result fit();

private:
  std::string loop_;
  loop_config cfg_;
  scaling_config scaling_;
  run_config run_;
};

namespace detail {

/// Pulls the trainer's registrations into every program that includes
/// this header, though the library is static.
bool trainer_registered();
inline const bool trainer_linked = trainer_registered();

} // namespace detail

} // namespace lumen::train
