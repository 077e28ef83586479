#include <algorithm>
#include <vector>

#include "lumen/errors.hpp"
#include "lumen/sim.hpp"

#include "sim/sim_host.hpp"
#include "sim/sim_runtime.hpp"

// Nodes that die and come back in a simulated run, and what the cluster
// does once it knows.

namespace lumen::detail {

int sim_runtime::live_node_after(int n) const {
  for (int k = 1; k <= world_.nodes(); ++k) {
    int i = (n + k) % world_.nodes();
    if (world_.alive(i))
      return i;
  }
  return -1;
}

void sim_runtime::kill_node(int n, sim::vtime at) {
  world_.schedule(at, [this, n] {
    if (!world_.alive(n))
      return;
    world_.kill(n);
    auto noticed = std::chrono::duration_cast<std::chrono::nanoseconds>(
                     lumen::sim::death_noticed_after)
                     .count();
    world_.schedule(world_.time() + noticed,
                    [this, n] { node_lost(n, "it was killed"); });
  });
}

void sim_runtime::restart_node(int n, sim::vtime at) {
  world_.schedule(at, [this, n] { world_.revive(n); });
}

void sim_runtime::node_lost(int n, const std::string& why) {
  auto& node = world_.node_name(n);
  for (auto i = tasks_out_.begin(); i != tasks_out_.end();) {
    if (i->second.to != n) {
      ++i;
      continue;
    }
    auto [work, out] = *i;
    i = tasks_out_.erase(i);
    // A spread task may run on another node; one placed on this one
    // cannot (as in a cluster).
    auto elsewhere = live_node_after(n);
    if (out.t->where.kind == placement::spread && out.retries_left > 0 &&
        elsewhere >= 0) {
      send_task(out.t, out.from, elsewhere, work, out.retries_left - 1);
      continue;
    }
    out.t->result()->set_error(std::make_exception_ptr(
      actor_died("task " + out.t->function().name + " was lost with node " +
                 node + ": " + why)));
  }
  for (auto i = calls_out_.begin(); i != calls_out_.end();) {
    if (i->second.node != n) {
      ++i;
      continue;
    }
    auto call = i->second.call;
    i = calls_out_.erase(i);
    call->result()->set_error(
      call->core->lost_call_error(call->method(), node, why));
  }
  // Its actors, in the order they were made (not the table's).
  std::vector<std::shared_ptr<host>> there;
  for (auto& [core, h] : hosts_)
    if (h->node == n && !core->dead)
      there.push_back(h);
  std::sort(there.begin(), there.end(),
            [](auto& a, auto& b) { return a->id < b->id; });
  for (auto& h : there)
    relocate(h, "its node " + node + " died (" + why + ")");
}

void sim_runtime::relocate(const std::shared_ptr<host>& h,
                           const std::string& why) {
  auto& core = *h->core;
  h->instance.reset();
  h->mailbox.clear(); // the calls in it were lost with the node
  h->running = 0;
  auto elsewhere = live_node_after(h->node);
  if (!core.begin_restart(why, elsewhere >= 0,
                          elsewhere >= 0 ? " on " + world_.node_name(elsewhere)
                                         : std::string{})) {
    end(*h);
    return;
  }
  h->node = elsewhere;
  core.remote->node_id = world_.node_name(elsewhere);
  // The head has it built again, as Ray's GCS does.
  build(h, 0, h->id);
}

} // namespace lumen::detail
