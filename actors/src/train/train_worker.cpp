// The trainer's workers: a typed actor on each node that runs a task's
// train loop on a thread of its own, with the loop's context, and what
// the loop calls (get_context, get_checkpoint, report).

#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/message_view.hpp>
#include <caf/result.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <lumen/cluster.hpp>
#include <lumen/errors.hpp>
#include <lumen/object_store.hpp>
#include <lumen/util/work_queue.hpp>

#include "lumen/collective/collective.hpp"

#include "train/train_wire.hpp"

namespace lumen::train {

using namespace detail;

namespace {

std::map<std::string, train_loop>& loops() {
  static std::map<std::string, train_loop> all;
  return all;
}

/// The train loop running on this thread, if any.
struct running_loop {
  train_context ctx;
  std::optional<checkpoint> from;
  train_reporter reporter;
  bool elastic = false;
};

thread_local const running_loop* current = nullptr;

const running_loop& in_loop(const char* what) {
  if (current == nullptr)
    throw usage_error(std::string{"lumen::train::"} + what +
                      " outside a train loop; call it from the function a "
                      "data_parallel_trainer runs");
  return *current;
}

/// True for what a lost process or node makes a loop throw: a collective
/// whose member is gone or silent, a peer that cannot be reached. Bad data,
/// a full disk, a diverged run or a bug fail the same way again after a
/// restart.
bool lost_a_peer(errc code) {
  switch (code) {
    case errc::peer_lost:
    case errc::timeout:
    case errc::unreachable:
    case errc::head_unreachable:
    case errc::node_dead:
    case errc::actor_died:
    case errc::channel_closed:
    case errc::owner_died:
      return true;
    default:
      return false;
  }
}

std::string failed_here(const train_task& task, const char* what) {
  return "rank " + std::to_string(task.ctx.world_rank) + " on node " +
         lumen::this_node_id() + ": " + what;
}

/// Runs a task's loop on the calling thread.
loop_end run_task(const train_task& task) {
  auto i = loops().find(task.loop);
  if (i == loops().end())
    return {"no train loop '" + task.loop + "' on node " +
              lumen::this_node_id() + "; register it with LUMEN_TRAIN_LOOP",
            false};
  running_loop here{
    task.ctx, task.resume ? std::optional<checkpoint>{task.from} : std::nullopt,
    task.reporter, task.elastic};
  current = &here;
  loop_end end;
  if (!task.records_dir.empty())
    collective::set_flight_records_dir(task.records_dir);
  try {
    // A member lost for good fails the others' next step in 10 s.
    collective::set_timeout(task.ctx.group, std::chrono::seconds(10));
    collective::init_group(task.ctx.world_size, task.ctx.world_rank,
                           task.ctx.group, collective::backend::processes);
    i->second(task.cfg);
  } catch (const regroup_signal&) {
    end.regroup = true;
  } catch (const error& e) {
    end.why = failed_here(task, e.what());
    end.restartable = lost_a_peer(e.code());
  } catch (const std::exception& e) {
    end.why = failed_here(task, e.what());
  }
  try {
    if (collective::is_group_initialized(task.ctx.group))
      collective::destroy_group(task.ctx.group);
  } catch (const std::exception&) {
    // The group failed already; the reason is in `end`.
  }
  current = nullptr;
  return end;
}

struct worker_state {
  std::vector<caf::typed_response_promise<loop_end>> waiting;
  // Last: its destructor lets the loop finish, then joins.
  std::unique_ptr<util::work_queue> lane = std::make_unique<util::work_queue>();
};

train_worker::behavior_type
worker(train_worker::stateful_pointer<worker_state> self) {
  // The loop's end is no message of the interface.
  self->set_default_handler(
    [self](caf::scheduled_actor*,
           caf::message_view& xs) -> caf::result<caf::message> {
      auto& msg = xs.content();
      auto& st = self->state;
      if (!msg.match_elements<loop_done_atom, loop_end>() || st.waiting.empty())
        return caf::sec::unexpected_message;
      st.waiting.front().deliver(msg.get_as<loop_end>(1));
      st.waiting.erase(st.waiting.begin());
      return caf::message{};
    });
  return {
    [=](run_loop_atom, train_task& task) {
      auto rp = self->make_response_promise<loop_end>();
      self->state.waiting.push_back(rp);
      caf::weak_actor_ptr me = self->ctrl();
      self->state.lane->post([me, task = std::move(task)] {
        auto end = run_task(task);
        if (auto alive = me.lock())
          caf::anon_send(caf::actor_cast<caf::actor>(alive),
                         loop_done_atom::value, std::move(end));
      });
      return rp;
    },
  };
}

} // namespace

const train_context& get_context() {
  return in_loop("get_context").ctx;
}

const std::optional<checkpoint>& get_checkpoint() {
  return in_loop("get_checkpoint").from;
}

void report(const metrics& m, const std::optional<checkpoint>& ckpt) {
  auto& here = in_loop("report");
  bool has = ckpt.has_value() && here.ctx.world_rank == 0;
  bool go_on = lumen::get(lumen::call(
    here.reporter, report_atom::value, int32_t{here.ctx.attempt},
    int32_t{here.ctx.world_rank}, m, has, has ? *ckpt : checkpoint{}));
  if (!here.elastic)
    return;
  // Rank 0's answer holds for all: the driver asks only there, where its
  // checkpoint was just stored, and every rank stops at the same report.
  std::vector<float> verdict{go_on ? 0.0f : 1.0f};
  collective::broadcast(verdict, 0, here.ctx.group);
  if (verdict[0] != 0)
    throw regroup_signal{};
}

void report_progress(const metrics& m) {
  auto& here = in_loop("report_progress");
  caf::anon_send(here.reporter, progress_atom::value, int32_t{here.ctx.attempt},
                 int32_t{here.ctx.world_rank}, m);
}

bool register_train_loop(const std::string& name, train_loop loop) {
  loops()[name] = std::move(loop);
  return true;
}

namespace detail {

bool has_train_loop(const std::string& name) {
  return loops().count(name) > 0;
}

} // namespace detail

LUMEN_TYPED_ACTOR(train_worker_name, worker);
LUMEN_MESSAGE_TYPE(train_task, "lumen::train::train_task");
LUMEN_MESSAGE_TYPE(loop_end, "lumen::train::loop_end");
LUMEN_MESSAGE_TYPE(checkpoint, "lumen::train::checkpoint");
LUMEN_MESSAGE_TYPE(metrics, "lumen::train::metrics");

} // namespace lumen::train
