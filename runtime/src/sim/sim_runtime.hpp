#pragma once

// The runtime of a simulated cluster (lumen/sim.hpp): the free functions'
// runtime interface over a sim::world. Work crosses the simulated network
// as a real cluster sends it: arguments encoded where they are ready, run
// on the node by name from the registry (node/named_work.hpp), the result
// encoded and sent back, where it is published into the caller's ref. So
// a script that runs here also encodes, places and fails as it would
// across processes, and every message has the size it would have there.

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "lumen/cluster.hpp"
#include "lumen/detail/runtime.hpp"

#include "core/actor_host.hpp"
#include "head/kv_store.hpp"
#include "sim/sim_typed.hpp"
#include "sim/sim_world.hpp"

namespace lumen::detail {

class sim_runtime final : public runtime {
public:
  /// Throws `usage_error` for settings out of range; `trace_file` as
  /// sim::world takes it.
  sim_runtime(const sim_options& opts, const std::string& trace_file);

  /// Ends the run: work still waiting unwinds, actors end.
  ~sim_runtime() override;

  sim::world& world() noexcept {
    return world_;
  }

  void submit_task(std::shared_ptr<task_spec> t) override;
  std::shared_ptr<actor_ref> spawn_actor(const actor_class_entry& cls,
                                         std::unique_ptr<actor_factory> f,
                                         const actor_options& opts) override;
  void submit_call(const actor_ref& a, std::shared_ptr<actor_call> c) override;
  std::shared_ptr<actor_ref> find_actor(const std::string& name) override;
  void kill_actor(const actor_ref& a) override;
  void create_placement_group(
    const std::shared_ptr<placement_group_state>& g) override;
  void remove_placement_group(placement_group_state& g) override;

  /// Refs and handles inside values: this process holds every object and
  /// actor of the run, so a wire names one in a table of the run, which
  /// keeps it until the run ends.
  ref_wire export_object(const std::shared_ptr<object_state>& st, uint64_t type,
                         value_encoder encoder) override;
  imported_object import_object(const ref_wire& wire) override;
  actor_wire export_actor(const std::shared_ptr<actor_ref>& a) override;
  std::shared_ptr<actor_ref> import_actor(const actor_wire& w) override;

  /// The key-value store, the head's on node-0: a call from another node
  /// is a message there and its answer back.
  bool kv_put(const std::string& key, const std::string& value,
              bool overwrite) override;
  std::optional<std::string> kv_get(const std::string& key) override;
  bool kv_erase(const std::string& key) override;
  std::vector<std::string> kv_keys(const std::string& prefix) override;

  /// Typed CAF actors in this run, made on first use.
  sim_typed& typed();

  /// The simulated nodes.
  std::vector<node_info> nodes() const;

  /// The index of the node named `id` for `api`; throws `usage_error`
  /// for one that does not exist, or node-0 unless `driver_too`.
  int node_named(const std::string& id, const std::string& api,
                 bool driver_too) const;

  /// lumen::sim::kill_node and restart_node, for node `n` at `at`; a
  /// `fenced` node is one a partition cut off, known dead at once.
  void kill_node(int n, sim::vtime at, bool fenced = false);
  void restart_node(int n, sim::vtime at);

  /// lumen::sim::partition, with the nodes of the side marked; throws
  /// `usage_error` for `api` if the side is no node or every node.
  void partition(std::vector<bool> side, sim::vtime at, sim::vtime lasting,
                 const std::string& api);

  /// lumen::sim::slow_node.
  void slow_node(int n, double factor, sim::vtime at, sim::vtime lasting);

private:
  struct host;

  /// A task sent to a node, until its answer is back.
  struct task_out {
    std::shared_ptr<task_spec> t;
    int from = 0;
    int to = 0;
    int retries_left = 0; // to run again elsewhere if its node dies
  };

  /// A call sent to an actor's node, until its answer is back.
  struct call_out {
    std::shared_ptr<actor_call> call;
    int node = 0;
  };

  /// Runs `op` at the head (node-0): at once from there, else as a
  /// message of `bytes` there and its answer of `back` bytes (what `op`
  /// returns) back, the caller waiting meanwhile.
  template <class R>
  R at_head(const std::string& what, uint64_t bytes, std::function<R()> op,
            const std::function<uint64_t(const R&)>& back);

  /// Schedules the faults of `opts` (flags, file, chaos).
  void plan_faults(const sim_options& opts);

  /// The next chaos fault of `kind` ("kill", "partition", "slow") after a
  /// time drawn for `rate` faults a virtual second.
  void next_chaos(const std::string& kind, double rate);

  /// A number in [lo, hi) drawn from the seed.
  double uniform(double lo, double hi);

  /// The cluster learns that node `n` died: its tasks and the calls that
  /// reached it fail (or run again), its actors restart elsewhere.
  void node_lost(int n, const std::string& why);

  /// Builds `h`'s actor again on another live node after its node died,
  /// if restarts are left; otherwise ends it.
  void relocate(const std::shared_ptr<host>& h, const std::string& why);

  /// The first live node after `n`, round the nodes; -1 if none is.
  int live_node_after(int n) const;

  /// Builds `h`'s instance on its node, from the constructor's bytes, as
  /// a message from `from`.
  void build(const std::shared_ptr<host>& h, int from, uint64_t work);

  /// The node `where` names for work called `what`; throws `usage_error`
  /// for a node that does not exist or a placement group.
  int place(const placement& where, const std::string& what);

  void send_task(const std::shared_ptr<task_spec>& t, int from, int to,
                 uint64_t work, int retries_left);

  /// Sends the result in `st` (bytes or an error) from node `from` back to
  /// `to`, where it is published into `x`'s ref.
  template <class Work>
  void answer(int from, int to, const std::shared_ptr<value_state<bytes>>& st,
              std::shared_ptr<Work> x, uint64_t work);

  /// Sends the calls of `h` whose arguments are ready, in their order.
  void pump(const std::shared_ptr<host>& h);

  /// Runs the calls that reached `h`'s node, as its concurrency allows.
  void drain(const std::shared_ptr<host>& h);

  /// Builds `h`'s instance on its node; false if the actor died of it.
  bool start_instance(const std::shared_ptr<host>& h);

  /// Takes `h`'s instance down for `reason`, restarting it if allowed and
  /// restarts are left; false if the actor is dead for good.
  bool die(const std::shared_ptr<host>& h, const std::string& reason,
           bool may_restart);

  /// Ends the actor of `h` for good (its death's reason set before).
  void end(host& h);

  // What waits for arguments after the run ended finds this gone.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  sim::world world_;
  std::map<std::string, std::shared_ptr<actor_ref>> names_;
  // By work number: the order they were sent in.
  std::map<uint64_t, task_out> tasks_out_;
  std::map<uint64_t, call_out> calls_out_;
  std::unordered_map<const actor_core*, std::shared_ptr<host>> hosts_;
  size_t spread_next_ = 0;
  kv_store kv_;
  // What refs and handles sent inside values stand for, by number.
  std::vector<std::pair<std::shared_ptr<object_state>, uint64_t>> sent_objects_;
  std::vector<std::shared_ptr<actor_ref>> sent_actors_;
  std::unique_ptr<sim_typed> typed_;
};

} // namespace lumen::detail
