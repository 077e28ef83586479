#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "lumen/cluster.hpp"
#include "lumen/detail/codec.hpp"
#include "lumen/detail/object_exchange.hpp"
#include "lumen/detail/object_state.hpp"
#include "lumen/detail/registry.hpp"

namespace lumen::detail {

/// Amounts of named resources ("cpu", "gpu", ...) a task or actor asks for.
using resource_request = std::map<std::string, double>;

/// Throws `usage_error` naming `api` for a negative, infinite or NaN
/// amount or an empty name.
void check_resources(const resource_request& r, const char* api);

/// One task invocation, from submission until its result is published. If it
/// is destroyed before that (the runtime shut down first), the result fails.
class task_spec : public cancellable {
public:
  task_spec(std::shared_ptr<object_state> result, const function_entry& fn,
            int max_retries, bool retry_exceptions);
  virtual ~task_spec();

  task_spec(const task_spec&) = delete;
  task_spec& operator=(const task_spec&) = delete;

  /// Runs the function once every dependency is ready, retrying exceptions
  /// as the options say; publishes the value or the error. A cancelled
  /// task does not start.
  void run();

  /// For a run on another node: the resolved arguments, encoded as the
  /// function's parameter types.
  virtual bytes encode_args() = 0;

  /// Publishes the encoded result of a run on another node.
  virtual void accept_result(const bytes& out) = 0;

  const function_entry& function() const noexcept {
    return *fn_;
  }
  const std::string& work_name() const noexcept override;
  int max_retries() const noexcept {
    return max_retries_;
  }
  bool retry_exceptions() const noexcept {
    return retry_exceptions_;
  }

  std::vector<std::shared_ptr<object_state>> deps;
  lumen::placement where;
  resource_request resources;
  /// What it holds of its process's resources while it runs; let go when
  /// run() returns.
  std::shared_ptr<void> held;

  /// The arrow from its submission to its run in a trace; 0 if untraced.
  uint64_t trace_flow = 0;

protected:
  /// One attempt: publishes the value, or throws the function's exception.
  virtual void attempt() = 0;

  const function_entry* fn_;
  int max_retries_;
  bool retry_exceptions_;
};

class actor_core;

/// One actor method invocation. If it is dropped before running, e.g. with a
/// dead actor's mailbox, its result fails with `actor_died`.
class actor_call : public cancellable {
public:
  actor_call(std::shared_ptr<object_state> result, const method_entry& m);
  virtual ~actor_call();

  actor_call(const actor_call&) = delete;
  actor_call& operator=(const actor_call&) = delete;

  /// Runs the method on `instance`. The method's exceptions fail the result,
  /// except `actor_fatal_error` and exit requests, which propagate to the
  /// actor's host to take the actor down.
  virtual void invoke(void* instance) = 0;

  /// For a call to an actor on another node: the resolved arguments,
  /// encoded as the method's parameter types.
  virtual bytes encode_args() = 0;

  /// Publishes the encoded result of a call run on another node.
  virtual void accept_result(const bytes& out) = 0;

  const method_entry& method() const noexcept {
    return *method_;
  }
  const std::string& work_name() const noexcept override;

  /// How often it was handed to a rebuilt instance (max_task_retries).
  /// First, to sit in cancellable's padding.
  int retries = 0;

  std::vector<std::shared_ptr<object_state>> deps;

  /// Set by the runtime on submission.
  std::shared_ptr<actor_core> core;
  uint64_t generation = 0;
  /// Its place among its caller's calls to a remote actor, which a call
  /// retried after the actor's node died keeps.
  uint64_t seq = 0;

  /// The arrow from its submission to its run in a trace; 0 if untraced.
  uint64_t trace_flow = 0;

protected:
  const method_entry* method_;
};

/// Builds (and, on restart, rebuilds) an actor's instance from the
/// constructor arguments it keeps.
class actor_factory {
public:
  virtual ~actor_factory();
  virtual std::shared_ptr<void> construct() = 0;

  /// The registry key of the constructor, for building it on another node.
  virtual std::string constructor_key() const = 0;

  /// The constructor arguments, encoded.
  virtual bytes encode_args() const = 0;
};

struct actor_options {
  std::string name;
  int max_restarts = 0;
  int max_task_retries = 0;
  /// Methods that may run at once, each on a thread of the actor's own.
  int max_concurrency = 1;
  /// Not ended when the process that made it ends (lumen::lifetime).
  bool detached = false;
  lumen::placement where;
  /// Held by the actor's process from its construction until it dies for
  /// good.
  resource_request resources;
};

/// Shared by the handles to one actor; an unnamed actor stops (after its
/// queued calls) when the last of them is gone.
class actor_ref;

/// What the free functions forward to: an embedded single-process runtime
/// today, a cluster client once a process joins one.
/// An ActorHandle on the wire: where its actor runs and who holds it for
/// the receiver (counted as refs are: lumen/detail/object_exchange.hpp).
struct actor_wire {
  std::string cls;
  std::string name;
  std::string id;         // ActorHandle::id()
  std::string node;       // the id of the process hosting the actor
  std::string host;       // that process's data address, if no node routes
  uint64_t remote_id = 0; // the actor's id on that process's data plane
  std::string holder;
  uint64_t hold = 0;
};

class runtime {
public:
  virtual ~runtime();

  /// Runs `t` on a task worker once its dependencies are ready.
  virtual void submit_task(std::shared_ptr<task_spec> t) = 0;

  /// Starts an actor; throws `usage_error` if the name is taken.
  virtual std::shared_ptr<actor_ref>
  spawn_actor(const actor_class_entry& cls, std::unique_ptr<actor_factory> f,
              const actor_options& opts) = 0;

  /// Queues `c` for the actor; fails it at once if the actor is dead.
  virtual void submit_call(const actor_ref& a,
                           std::shared_ptr<actor_call> c) = 0;

  /// The live actor registered under `name`, or null.
  virtual std::shared_ptr<actor_ref> find_actor(const std::string& name) = 0;

  /// Ends the actor without restart; its queued and later calls fail.
  virtual void kill_actor(const actor_ref& a) = 0;

  /// Places `g`'s bundles on nodes and has them reserved there, resolving
  /// g->ready once all are; throws `usage_error` (errc::infeasible) if no
  /// layout can hold them.
  virtual void
  create_placement_group(const std::shared_ptr<placement_group_state>& g) = 0;

  /// See lumen::remove_placement_group.
  virtual void remove_placement_group(placement_group_state& g) = 0;

  /// A ref inside a value bound for another node, held for the receiver
  /// (lumen/detail/object_exchange.hpp), and what a received one stands
  /// for; by default through this process's object exchange, which a
  /// process outside a cluster has none of (`usage_error`).
  virtual ref_wire export_object(const std::shared_ptr<object_state>& st,
                                 uint64_t type, value_encoder encoder);
  virtual imported_object import_object(const ref_wire& wire);

  /// lumen::kv's store (lumen/kv.hpp): the head's in a cluster, this
  /// process's own outside one; a put that breaks a bound throws
  /// `usage_error` saying which.
  virtual bool kv_put(const std::string& key, const std::string& value,
                      bool overwrite) = 0;
  virtual std::optional<std::string> kv_get(const std::string& key) = 0;
  virtual bool kv_erase(const std::string& key) = 0;
  virtual std::vector<std::string> kv_keys(const std::string& prefix) = 0;

  /// The same for an actor handle inside a value; by default refused
  /// (`usage_error`): only a cluster's process sends them.
  virtual actor_wire export_actor(const std::shared_ptr<actor_ref>& a);
  virtual std::shared_ptr<actor_ref> import_actor(const actor_wire& w);
};

/// Holds `a` for the process that receives the wire; throws `usage_error`
/// outside a cluster.
actor_wire export_actor(const std::shared_ptr<actor_ref>& a);

/// A handle to the actor of `w`: this process's own if it hosts the actor.
/// Throws `usage_error` if its class is not registered here.
std::shared_ptr<actor_ref> import_actor(const actor_wire& w);

/// The runtime started by `lumen::init`; throws `usage_error` otherwise.
runtime& current_runtime();

/// The name of this node, reported in errors ("local" for an embedded
/// cluster). Kept after shutdown. Thread-safe.
std::string this_node();

/// Names this process's node: when the runtime starts, and when a node
/// rejoins under a new id. Thread-safe.
void set_this_node(std::string id);

const actor_class_entry& class_of(const actor_ref& a);
const std::string& name_of(const actor_ref& a);
std::string id_of(const actor_ref& a);
int restarts_of(const actor_ref& a);
bool alive(const actor_ref& a);

} // namespace lumen::detail
