#pragma once

#include <functional>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include "lumen/detail/runtime.hpp"

#include "core/actor_host.hpp"
#include "core/resource_ledger.hpp"

namespace lumen::detail {

class data_client;

/// What the parts of a cluster process (the cluster client, the data
/// server, the node manager) need from its runtime, and no more: none of
/// them calls into a runtime class.
class process_services {
public:
  virtual caf::actor_system& system() = 0;

  /// Runs `job` on the requester, the event-based actor that issues CAF
  /// requests and monitors for this process.
  virtual void
  run_as_requester(std::function<void(caf::event_based_actor*)> job) = 0;

  /// Runs `t` on this process's task pool once its dependencies are ready
  /// and its resources are free here.
  virtual void run_local(std::shared_ptr<task_spec> t) = 0;

  /// This process's resources (init_options::resources).
  virtual resource_ledger& resources() = 0;

  /// The actor holding this process's bundles of placement groups
  /// (bundle_keeper.hpp).
  virtual caf::actor bundle_keeper() = 0;

  /// Hosts an actor in this process, whatever its placement says; throws
  /// `usage_error` if its name is taken here, or (errc::infeasible) if
  /// this process has less of a resource than the actor asks for.
  virtual std::shared_ptr<actor_ref>
  spawn_local_actor(const actor_class_entry& cls,
                    std::unique_ptr<actor_factory> f,
                    const actor_options& opts) = 0;

  /// Registers an actor another node hosts for this process.
  virtual std::shared_ptr<actor_ref>
  adopt_remote_actor(std::shared_ptr<actor_core> core) = 0;

  /// Ends the actor of `core` without restart, as lumen::kill.
  virtual void kill_core(actor_core& core) = 0;

  /// Ends this process at once, as a crash would, for `why`, if it is a
  /// node (lumen::cancel with force); the head and drivers log `why` and
  /// go on.
  virtual void force_end(const std::string& why) = 0;

  /// Ends `h` at shutdown, so that the actor system can finish.
  virtual void adopt(caf::actor h) = 0;

  /// The data connection to the cluster process serving at `address`;
  /// throws `error` if it cannot be reached.
  virtual std::shared_ptr<data_client>
  connect_to(const std::string& address) = 0;

protected:
  ~process_services() = default;
};

} // namespace lumen::detail
