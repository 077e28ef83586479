#pragma once

// Typed CAF actors in a simulated run (lumen::spawn_on, lumen::call,
// lumen::request): an actor system of the run's own on CAF's test
// coordinator, which runs nothing by itself but keeps a list of the
// actors that have a message to handle (its jobs). The run takes each job
// as an event and resumes the actor for one message on a fiber of the
// actor's node, so a handler may charge compute, sleep, get, wait and run
// collectives as a task does, and the seed orders handlers among the
// run's other events. CAF's timers go by the virtual clock.
//
// A request between typed actors of different nodes (lumen::call and
// lumen::request, which a cluster sends on the data plane) crosses the
// simulated link both ways, its bytes counted as the data plane would
// send them, and reaches the actor from a stand-in for its sender, as on
// the data plane. What CAF delivers itself (send, delegate, monitors, a
// message holding an actor handle) arrives at once. A node's death kills
// its typed actors, fails the requests to them, and ends the stand-ins of
// its requesters, so a server monitoring them hears of it.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "sim/sim_world.hpp"
#include "transport/typed_host.hpp"

namespace lumen::detail {

class sim_typed final : public typed_host {
public:
  explicit sim_typed(sim::world& w);

  /// Call stop() first.
  ~sim_typed();

  sim_typed(const sim_typed&) = delete;
  sim_typed& operator=(const sim_typed&) = delete;

  caf::actor_system& system() override {
    return *sys_;
  }
  void
  run_as_requester(std::function<void(caf::event_based_actor*)> job) override {
    requester_.run(std::move(job));
  }
  void adopt(caf::actor h) override {
    adopted_.push_back(std::move(h));
  }
  std::string node_of(const caf::actor_addr& who) override;
  caf::expected<caf::strong_actor_ptr>
  spawn_typed(const std::string& node_id, const std::string& name,
              caf::message args,
              const std::set<std::string>& interface) override;
  bool send_typed(const caf::strong_actor_ptr& target, uint64_t sender,
                  const caf::message& msg, bool carries_handles,
                  typed_done done) override;

  /// Node `n` died (`why`, for the errors): its typed actors die, the
  /// requests to them fail, and its requesters' stand-ins end.
  void node_died(int n, const std::string& why);

  /// Before the world stops: the handlers still waiting then unwind
  /// quietly (CAF would print each one's exception).
  void ending();

  /// Ends every typed actor; after the world stopped, before the end.
  void stop();

private:
  class unit;

  /// A typed actor of the run: its node, and its name for the log.
  struct placed {
    int node = 0;
    const std::string* label = nullptr;
    caf::weak_actor_ptr self;
  };

  /// A request on a simulated link, until its answer is back.
  struct pending {
    int from = 0;
    int to = 0;
    const std::string* label = nullptr;
    typed_done done;
  };

  /// The coordinator's new jobs as events, and its next timer as one.
  void feed();

  /// Resumes `job` for one message (on a fiber of its actor's node).
  void resume(caf::resumable* job);

  /// The actor a job is (its CAF id) and where it runs: placed on first
  /// sight, as the coordinator takes it, on the node that spawns it.
  std::pair<const uint64_t, placed>& place_of(caf::resumable* job);

  /// Kills the typed actors of node `n`, or every one for -1.
  void kill_actors(int n);

  /// The stand-in of requester `sender` on node `from`, made on first use.
  caf::strong_actor_ptr stand_in(int from, uint64_t sender);

  /// The answer to request `work`, back over the link.
  void answer(uint64_t work, caf::message msg);

  /// Request `work` is over: `reply` (a caf::error alone for a failure).
  void settle(uint64_t work, caf::message reply);

  /// The bytes the data plane would send for `msg`.
  uint64_t size_of(const caf::message& msg);

  sim::world& world_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  caf::scheduler::test_coordinator* sched_ = nullptr;
  std::unique_ptr<unit> unit_;
  caf::actor_clock::time_point epoch_;
  sim::vtime timer_at_ = sim::no_deadline;
  // By CAF actor id; a map: a node's death walks it in a fixed order.
  std::map<uint64_t, placed> actors_;
  int placing_ = -1;           // the node of the actor being spawned, if one is
  std::set<uint64_t> running_; // actors whose handler is under way
  std::vector<caf::actor> adopted_;     // kept alive until the run ends
  std::map<uint64_t, pending> pending_; // by work
  std::map<std::pair<int, uint64_t>, caf::strong_actor_ptr> stand_ins_;
  bool stopped_ = false;
};

} // namespace lumen::detail
