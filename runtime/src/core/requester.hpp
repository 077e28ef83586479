#pragma once

// The requester: the event-based actor that issues a runtime's CAF requests
// (typed calls, and in a cluster process remote tasks and actor calls and
// placement groups' reserves) and hears when a watched actor goes down.
// A process's runtime has one, and so has a simulated run's typed actors.

#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <unordered_map>

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/system_messages.hpp>

namespace lumen::detail {

class requester {
public:
  /// Spawns the actor in `sys`.
  void start(caf::actor_system& sys);

  /// Runs `job` on the actor; thread-safe. Dropped once stopped: what it
  /// would have answered fails as its state goes away.
  void run(std::function<void(caf::event_based_actor*)> job);

  /// Ends the actor; thread-safe.
  void stop();

  /// On the requester's thread: `fail` runs if `whom` goes down first.
  /// Returns a token for `unwatch`.
  uint64_t watch(caf::event_based_actor* self, const caf::actor& whom,
                 std::function<void()> fail);

  /// On the requester's thread: forgets the `fail` of `token`.
  void unwatch(const caf::actor_addr& whom, uint64_t token);

  /// Has every down message the requester hears go to `fn` too, on its
  /// thread; call before anything is monitored that `fn` should hear of.
  void hear_downs(std::function<void(const caf::down_msg&)> fn);

private:
  void went_down(const caf::down_msg& msg);

  std::mutex mtx_;
  caf::actor actor_; // under mtx_ once other threads run
  // The requester's thread only: what to fail when a watched actor goes
  // down, and who else hears of it.
  std::unordered_map<caf::actor_addr,
                     std::unordered_map<uint64_t, std::function<void()>>>
    watched_;
  uint64_t next_watch_ = 1;
  std::set<caf::actor_addr> monitored_;
  std::function<void(const caf::down_msg&)> on_down_;
};

} // namespace lumen::detail
