#pragma once

// Where lumen/caf_interop.hpp's calls go: a process's runtime (its actor
// system, the data plane to other processes, node managers that spawn), or
// a simulated run's typed actors (sim/sim_typed.hpp), which cross simulated
// links instead.

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/expected.hpp>
#include <caf/message.hpp>

#include "lumen/detail/caf_request.hpp"

#include "core/requester.hpp"

namespace lumen::detail {

class typed_host {
public:
  virtual caf::actor_system& system() = 0;

  virtual void
  run_as_requester(std::function<void(caf::event_based_actor*)> job) = 0;

  /// Ends `h` when the runtime ends.
  virtual void adopt(caf::actor h) = 0;

  /// lumen::detail::watch and unwatch, on the requester's thread.
  uint64_t watch(caf::event_based_actor* self, const caf::actor& whom,
                 std::function<void()> fail) {
    return requester_.watch(self, whom, std::move(fail));
  }
  void unwatch(const caf::actor_addr& whom, uint64_t token) {
    requester_.unwatch(whom, token);
  }

  /// The node the actor `who` runs on, for errors; never blocks.
  virtual std::string node_of(const caf::actor_addr& who) = 0;

  /// Spawns the typed actor registered as `name` on node `node_id`, or
  /// says why it could not (lumen::spawn_on words the error).
  virtual caf::expected<caf::strong_actor_ptr>
  spawn_typed(const std::string& node_id, const std::string& name,
              caf::message args, const std::set<std::string>& interface) = 0;

  /// See lumen::detail::send_typed.
  virtual bool send_typed(const caf::strong_actor_ptr& target, uint64_t sender,
                          const caf::message& msg, bool carries_handles,
                          typed_done done) = 0;

protected:
  ~typed_host() = default;

  // The actor the host's requests and watches go from.
  requester requester_;
};

/// The configuration steps LUMEN_TYPED_ACTOR recorded.
std::vector<config_step>& config_steps();

/// The typed host of the running runtime, simulated or not; throws
/// `usage_error` if Lumen is not running.
typed_host& this_typed_host();

/// The same, or null outside `lumen::init` and `lumen::shutdown`.
typed_host* running_typed_host();

} // namespace lumen::detail
