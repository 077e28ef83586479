#include "lumen/train/trainer.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/atom.hpp>
#include <caf/message_view.hpp>
#include <caf/replies_to.hpp>
#include <caf/result.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/cluster.hpp>
#include <lumen/errors.hpp>
#include <lumen/object_store.hpp>

#include "train/metrics_log.hpp"
#include "train/node_watch.hpp"
#include "train/run_record.hpp"
#include "train/train_wire.hpp"

namespace fs = std::filesystem;

namespace lumen::train {

using namespace detail;

namespace {

/// Why fit() gives up: `failed`, after `restarts`, and where the last
/// checkpoint is.
training_error stopped(const loop_end& failed, int restarts, run_state& st) {
  std::string last;
  {
    std::lock_guard<std::mutex> guard{st.mtx};
    if (!st.stored.empty())
      last = st.stored.back().first.string();
  }
  std::string what = "training stopped";
  if (restarts > 0)
    what += " after " + std::to_string(restarts) + " restarts";
  what += ": " + failed.why;
  if (failed.restartable && restarts == 0)
    what += "; failure_config::max_failures allows restarts from the last "
            "checkpoint";
  what += last.empty() ? "; no checkpoint was stored"
                       : "; the last checkpoint is " + last;
  return {what, failed.why, failed.restartable, restarts, last};
}

/// True if this process lost the cluster's head: no restart can place
/// workers without it.
bool head_lost() {
  try {
    static_cast<void>(lumen::nodes());
    return false;
  } catch (const error& e) {
    return e.code() == errc::head_unreachable;
  }
}

std::string host_of(const std::string& address) {
  return address.substr(0, address.rfind(':'));
}

} // namespace

double value_or(const loop_config& cfg, const std::string& key,
                double fallback) {
  auto i = cfg.find(key);
  if (i == cfg.end())
    return fallback;
  if (i->second.is_text)
    throw usage_error("the train loop's setting '" + key + "' is the text '" +
                      i->second.text + "'; it takes a number");
  return i->second.number;
}

std::string text_or(const loop_config& cfg, const std::string& key,
                    const std::string& fallback) {
  auto i = cfg.find(key);
  if (i == cfg.end())
    return fallback;
  if (!i->second.is_text)
    throw usage_error("the train loop's setting '" + key + "' is the number " +
                      std::to_string(i->second.number) + "; it takes a text");
  return i->second.text;
}

data_parallel_trainer::data_parallel_trainer(std::string loop, loop_config cfg,
                                             scaling_config scaling,
                                             run_config run)
  : loop_(std::move(loop))
  , cfg_(std::move(cfg))
  , scaling_(scaling)
  , run_(std::move(run)) {
  if (!detail::has_train_loop(loop_))
    throw usage_error("data_parallel_trainer: no train loop '" + loop_ +
                      "'; register it with LUMEN_TRAIN_LOOP");
  if (scaling_.num_workers == 0)
    throw usage_error("data_parallel_trainer: 0 workers; give "
                      "scaling_config::num_workers 1 at least");
  if (scaling_.min_workers > scaling_.num_workers)
    throw usage_error("data_parallel_trainer: min_workers " +
                      std::to_string(scaling_.min_workers) + " above " +
                      std::to_string(scaling_.num_workers) +
                      " workers; give min_workers up to num_workers");
  if (run_.failure.max_failures < 0)
    throw usage_error("data_parallel_trainer: max_failures is negative");
}

std::string run_dir(const run_config& run) {
  auto home = std::getenv("HOME");
  fs::path storage = !run.storage_path.empty() ? fs::path{run.storage_path}
                     : home != nullptr && *home != '\0'
                       ? fs::path{home} / "lumen_results"
                       : fs::path{"lumen_results"};
  return (storage / run.name).string();
}

train_result data_parallel_trainer::fit() {
  auto st = open_run(run_, run_dir(run_));
  // However fit ends, the plot shows every row recorded.
  struct plot_at_exit {
    run_state& st;
    bool pending = true;
    ~plot_at_exit() {
      if (!pending)
        return;
      std::lock_guard<std::mutex> guard{st.mtx};
      try {
        st.log->plot(true);
      } catch (const std::exception&) {
        // Why the run failed says more than why its plot could not be
        // drawn; the rows are there.
      }
    }
  } last_plot{*st};
  auto rep = lumen::spawn(reporter, st);
  train_result out;
  bool grew = false; // the last attempt ended to regroup with more workers
  for (int attempt = 0;; ++attempt) {
    {
      std::lock_guard<std::mutex> guard{st->mtx};
      st->attempt = attempt;
    }
    // Other processes first (a worker each), then this one.
    std::vector<node_info> places;
    auto all = lumen::nodes();
    for (bool here : {false, true})
      for (auto& n : all)
        if (n.alive && (n.id == lumen::this_node_id()) == here)
          places.push_back(n);
    auto fewest =
      scaling_.min_workers > 0 ? scaling_.min_workers : scaling_.num_workers;
    if (places.size() < fewest)
      throw error("data_parallel_trainer: " + std::to_string(fewest) +
                  " workers at least, but " + std::to_string(places.size()) +
                  " live nodes; start more (--local-nodes N, or lumen start "
                  "on more machines), or ask for fewer workers" +
                  (out.errors.empty() ? std::string{}
                                      : " (the last attempt failed: " +
                                          out.errors.back() + ")"));
    auto workers = std::min(places.size(), scaling_.num_workers);
    if (grew && run_.on_grow)
      run_.on_grow(workers);
    else if (attempt > 0 && run_.on_restart)
      run_.on_restart(out.errors.back(), workers);
    {
      std::lock_guard<std::mutex> guard{st->mtx};
      st->workers = workers;
      st->grow = false;
      st->regrouping = false;
    }
    bool elastic = scaling_.min_workers > 0;
    std::optional<node_watch> watch;
    if (elastic && workers < scaling_.num_workers)
      watch.emplace(workers, [st] {
        std::lock_guard<std::mutex> guard{st->mtx};
        st->grow = true;
      });
    auto group = "lumen.train." + run_.name + "." + std::to_string(::getpid()) +
                 "." + std::to_string(attempt);
    std::vector<ObjectRef<loop_end>> runs;
    std::map<std::string, int> per_host;
    for (size_t r = 0; r < workers; ++r) {
      train_task task;
      task.loop = loop_;
      task.cfg = cfg_;
      task.ctx.world_rank = static_cast<int>(r);
      task.ctx.world_size = static_cast<int>(workers);
      task.ctx.local_rank = per_host[host_of(places[r].address)]++;
      task.ctx.group = group;
      task.ctx.attempt = attempt;
      {
        std::lock_guard<std::mutex> guard{st->mtx};
        task.resume = st->latest.has_value();
        if (task.resume)
          task.from = *st->latest;
      }
      task.reporter = rep;
      task.elastic = elastic;
      task.records_dir = st->dir.string();
      auto w = lumen::spawn_on<train_worker>(places[r].id, train_worker_name);
      runs.push_back(lumen::call(w, run_loop_atom::value, std::move(task)));
    }
    // The attempt's failure: the first that no restart mends, if any
    // (its peers then fail only for its loss), else the first lost
    // worker's.
    std::optional<loop_end> failed;
    grew = false;
    for (auto& r : runs) {
      loop_end end;
      try {
        end = lumen::get(r);
      } catch (const std::exception& e) {
        end = {e.what(), true, false}; // the worker's process or node is gone
      }
      grew = grew || end.regroup;
      if (!end.why.empty() &&
          (!failed || (failed->restartable && !end.restartable)))
        failed = end;
    }
    {
      std::lock_guard<std::mutex> guard{st->mtx};
      if (!st->fatal.empty())
        failed = loop_end{st->fatal, false};
    }
    watch.reset();
    if (!failed && grew)
      continue; // nodes joined: the next attempt has a worker on each
    grew = false;
    if (!failed)
      break;
    if (failed->restartable && head_lost())
      failed = loop_end{"the cluster's head went down mid-run, and with it "
                        "this driver's links to the workers (" +
                          failed->why +
                          "); start the head again at its address and go on "
                          "from the last checkpoint",
                        false};
    out.errors.push_back(failed->why);
    if (!failed->restartable || out.failures >= run_.failure.max_failures)
      throw stopped(*failed, out.failures, *st);
    ++out.failures;
  }
  std::lock_guard<std::mutex> guard{st->mtx};
  last_plot.pending = false;
  st->log->plot(true);
  out.history = st->history;
  if (!out.history.empty())
    out.last = out.history.back();
  if (!st->stored.empty())
    out.last_checkpoint = st->stored.back().first.string();
  out.best_checkpoint = st->best;
  return out;
}

namespace detail {

bool trainer_registered() {
  return true;
}

} // namespace detail

} // namespace lumen::train
