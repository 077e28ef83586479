#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <deque>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "lumen/detail/runtime.hpp"

#include "core/resource_ledger.hpp"

namespace lumen::detail {

/// What only an actor hosted by another process has: the node hosting it
/// and the calls on their way there. `mtx` guards these and the core's
/// `handle`, which change when the actor is rebuilt on another node.
struct remote_proxy {
  std::mutex mtx;
  std::string node_id;
  /// For an actor hosted by a script, which no node id routes to: the
  /// data address of its process.
  std::string address;
  /// ActorHandle::id() of an actor known only from a handle another
  /// process sent (no CAF handle here).
  std::string actor_id;
  /// The actor's id on that node's data plane.
  uint64_t remote_id = 0;
  /// Calls wait here, in submission order, until their arguments are
  /// ready (see remote_actors::pump).
  std::deque<std::shared_ptr<actor_call>> outbox;
  bool outbox_blocked = false;
  /// A thread is encoding and sending the call it took from the outbox.
  bool sending = false;
  /// Its node died and it is being rebuilt elsewhere: calls wait.
  bool relocating = false;
  /// Calls submitted so far, for actor_call::seq.
  uint64_t submitted = 0;
};

/// Everything about one actor that outlives a single instance of it: what to
/// rebuild it from, how often it restarted, why it died. Shared by its
/// handles, its queued calls and its host.
class actor_core {
public:
  actor_core(const actor_class_entry& cls, std::unique_ptr<actor_factory> f,
             actor_options opts);

  const actor_class_entry& cls;
  const std::unique_ptr<actor_factory> factory;
  const actor_options opts;

  /// Bumped on every restart; calls stamped with an older one are dropped.
  std::atomic<uint64_t> generation{0};
  std::atomic<int> restarts{0};
  /// Dead for good: killed, out of restarts, or failed to construct.
  std::atomic<bool> dead{false};

  /// The CAF actor running this actor; set once at spawn, cleared at
  /// shutdown before the actor system goes away.
  caf::actor handle;

  /// Called on the host's thread when the actor is dead for good.
  std::function<void(actor_core&)> on_dead;

  /// For an actor hosted by another process, where it is and what waits
  /// to reach it; null for one hosted here. Set before anyone else sees
  /// the core, never reset.
  std::unique_ptr<remote_proxy> remote;
  /// Found by name, created by another process: never stopped or killed on
  /// this process's behalf except by lumen::kill, and never rebuilt here.
  bool borrowed = false;
  /// For a handle another process sent: its share of the actor's life,
  /// given back once this core is gone (object_exchange.hpp).
  std::shared_ptr<void> lease;

  void set_death_reason(std::string reason);

  /// Its instance died for `reason`: whether it is built again (restarts
  /// left and `may_restart`), counting the restart and moving the
  /// generation on. The death's reason says which ("; restarted (1 of 3)",
  /// then `where`).
  bool begin_restart(const std::string& reason, bool may_restart,
                     const std::string& where = {});

  /// Why it died, or "it stopped".
  std::string death_reason() const;

  /// The `actor_died` for a call to `method` that was dropped.
  std::exception_ptr dropped_call_error(const method_entry& method) const;

  /// The error of a call that reached the actor's node, which then went
  /// down (`why`) before it answered: the call may have run, in part.
  std::exception_ptr lost_call_error(const method_entry& method,
                                     const std::string& node,
                                     const std::string& why) const;

  /// "actor 'name' (Class)" or "actor of class Class".
  std::string describe() const;

private:
  mutable std::mutex mtx_;
  std::string death_reason_;
};

class actor_ref {
public:
  explicit actor_ref(std::shared_ptr<actor_core> c);
  ~actor_ref();

  actor_ref(const actor_ref&) = delete;
  actor_ref& operator=(const actor_ref&) = delete;

  const std::shared_ptr<actor_core> core;
};

/// The id of the actor hosted by the CAF actor `host` (ActorHandle::id):
/// its CAF address, which every process names alike.
std::string actor_id_of(const caf::actor_addr& host);

/// Runs the actor on a thread of its own (a detached CAF actor), so that a
/// method blocking in `lumen::get` stalls only this actor, as a Ray actor
/// blocks only its own worker process. The instance is built once `ledger`
/// granted the actor's resources; `revoked` is called if the ledger takes
/// them back (their placement group was removed).
caf::actor spawn_host(caf::actor_system& sys, std::shared_ptr<actor_core> core,
                      resource_ledger& ledger,
                      resource_ledger::revoke_fn revoked);

/// Why building an actor's instance failed: the reason its death gives,
/// and whether a restart may help (a constructor that threw an ordinary
/// exception would throw it again).
struct construction_failure {
  std::string reason;
  bool may_restart = false;
};

/// Builds an instance of class `cls` with `factory` into `instance`;
/// what went wrong, if anything. Shared by the hosts of every role.
std::optional<construction_failure>
construct_instance(actor_factory& factory, const std::string& cls,
                   std::shared_ptr<void>& instance);

/// The id of the actor the calling thread runs, for
/// lumen::current_actor_id() and lumen::exit_actor(); empty elsewhere. The
/// simulated cluster's fibers share one thread: each swaps its own in.
std::string& current_actor_slot();

/// Whether `c`, pending while its actor died `deaths` times, may go to the
/// rebuilt instance (max_task_retries: each death it lived through counts
/// as a retry); if so, counts them and stamps `c` with the current
/// generation.
bool retry_on_new_instance(actor_call& c, uint64_t deaths);

/// retry_on_new_instance for a call of this process's own host, stamped
/// with an older generation: the deaths are the generations in between.
bool retry_on_current_instance(actor_call& c);

/// Queues `c` on its actor's host.
void send_call(const actor_core& core, std::shared_ptr<actor_call> c);

/// Tells the host to stop once its queued calls ran.
void send_stop(const actor_core& core);

/// Whether the host runtime is up; messages are sent only while it is.
extern std::atomic<bool> hosts_running;

} // namespace lumen::detail
