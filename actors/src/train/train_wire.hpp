#pragma once

// What the trainer's driver (trainer.cpp) and its workers
// (train_worker.cpp) send each other: a worker runs a task's loop and
// answers with how it ended; rank 0's reports go to the driver's
// reporter.

#include <cstdint>
#include <string>

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <lumen/caf_interop.hpp>

#include "lumen/train/trainer.hpp"

namespace lumen::train {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, train_context& x) {
  return f(caf::meta::type_name("lumen::train::train_context"), x.world_rank,
           x.world_size, x.local_rank, x.group, x.attempt);
}

} // namespace lumen::train

namespace lumen::train::detail {

using report_atom = caf::atom_constant<caf::atom("lmtreport")>;
using run_loop_atom = caf::atom_constant<caf::atom("lmtrun")>;
using loop_done_atom = caf::atom_constant<caf::atom("lmtdone")>;
using progress_atom = caf::atom_constant<caf::atom("lmtprog")>;

/// Rank 0's reports as the driver keeps them, and its progress as the
/// driver shows it. A report's answer: false asks the ranks to stop there
/// (rank 0's report with a checkpoint, in an elastic run that can grow).
using train_reporter =
  caf::typed_actor<caf::replies_to<report_atom, int32_t, int32_t, metrics, bool,
                                   checkpoint>::with<bool>,
                   caf::reacts_to<progress_atom, int32_t, int32_t, metrics>>;

/// What a worker is asked to run.
struct train_task {
  std::string loop;
  loop_config cfg;
  train_context ctx;
  bool resume = false;
  checkpoint from;
  train_reporter reporter;
  bool elastic = false;    // the run may regroup at a report (report())
  std::string records_dir; // where a stalled group's flight records go
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, train_task& x) {
  return f(caf::meta::type_name("lumen::train::train_task"), x.loop, x.cfg,
           x.ctx, x.resume, x.from, x.reporter, x.elastic, x.records_dir);
}

/// How a worker's loop ended.
struct loop_end {
  std::string why;          // "" if the loop returned
  bool restartable = false; // it lost a peer; a restart may mend that
  bool regroup = false;     // it stopped at a report for the run to grow
};

/// What report() throws on every rank when the driver asks an elastic
/// run to regroup with more workers: not an exception a loop's own
/// `catch (const std::exception&)` takes.
struct regroup_signal {};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, loop_end& x) {
  return f(caf::meta::type_name("lumen::train::loop_end"), x.why, x.restartable,
           x.regroup);
}

using train_worker =
  caf::typed_actor<caf::replies_to<run_loop_atom, train_task>::with<loop_end>>;

/// The name workers are registered under.
constexpr const char* train_worker_name = "lumen.train.worker";

/// True if a loop is registered as `name` in this process.
bool has_train_loop(const std::string& name);

/// True for a folder that checkpoint::to_directory left half written (its
/// process was killed): a run's start removes it.
bool is_partial_checkpoint(const std::string& name);

} // namespace lumen::train::detail

namespace lumen {

template <>
struct carries_actor_handle<train::detail::train_task> : std::true_type {};

} // namespace lumen
