#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "lumen/errors.hpp"
#include "lumen/sim.hpp"

#include "sim/sim_fault_plan.hpp"
#include "sim/sim_fiber.hpp"
#include "sim/sim_host.hpp"
#include "sim/sim_runtime.hpp"

// Faults in a simulated run: nodes that die and come back, links cut and
// nodes slowed, on the world's side (what the network and the nodes do)
// and the runtime's (what the cluster does once it knows).

namespace lumen::detail {

void sim::world::cut(const std::vector<bool>& side, vtime heal) {
  auto n = static_cast<size_t>(nodes());
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b)
      if (side[a] != side[b])
        link_cut_[a * n + b] = std::max(link_cut_[a * n + b], heal);
}

void sim::world::slow(int i, double factor) {
  auto k = static_cast<size_t>(i);
  slowness_[k] = base_slowness_[k] * factor;
  char text[32];
  std::snprintf(text, sizeof(text), "%g", slowness_[k]);
  record("slow", i, -1, text, 0, 0);
}

void sim::world::kill(int i, const std::string& cause) {
  if (!alive(i))
    return;
  alive_[static_cast<size_t>(i)] = false;
  ++incarnation_[static_cast<size_t>(i)];
  died_at_[static_cast<size_t>(i)] = now_;
  for (auto& f : fibers_)
    if (f->job && f->node == i)
      f->killed = true;
  record("kill", i, -1, cause, 0, 0);
}

void sim::world::revive(int i) {
  if (alive(i))
    return;
  alive_[static_cast<size_t>(i)] = true;
  known_down_[static_cast<size_t>(i)] = false;
  ++incarnation_[static_cast<size_t>(i)];
  static const std::string none;
  record("restart", i, -1, none, 0, 0);
}

int sim_runtime::live_node_after(int n) const {
  for (int k = 1; k <= world_.nodes(); ++k) {
    int i = (n + k) % world_.nodes();
    if (world_.alive(i))
      return i;
  }
  return -1;
}

namespace {

const sim::vtime noticed = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             lumen::sim::death_noticed_after)
                             .count();

const std::string partition_cause = "partition";

} // namespace

int sim_runtime::node_named(const std::string& id, const std::string& api,
                            bool driver_too) const {
  auto i = world_.node_index(id);
  if (i < 0)
    throw usage_error(api + ": '" + id + "' is not a simulated node; " +
                      world_.node_range());
  if (i == 0 && !driver_too)
    throw usage_error(api + ": node-0 is where the script itself runs; give "
                            "another node");
  return i;
}

void sim_runtime::kill_node(int n, sim::vtime at, bool fenced) {
  world_.schedule(at, [this, n, fenced] {
    if (!world_.alive(n))
      return;
    static const std::string killed;
    world_.kill(n, fenced ? partition_cause : killed);
    auto why = fenced
                 ? "a partition cut it off from node-0 for " +
                     std::to_string(lumen::sim::death_noticed_after.count()) +
                     " s, and the cluster fenced it"
                 : std::string{"it was killed"};
    // Its connections close with it: typed requests fail at once.
    if (typed_)
      typed_->node_died(n, why);
    // A fenced node is known dead at once: the cut took the detector's time.
    world_.schedule(world_.time() + (fenced ? 0 : noticed),
                    [this, n, why] { node_lost(n, why); });
  });
}

void sim_runtime::restart_node(int n, sim::vtime at) {
  world_.schedule(at, [this, n] { world_.revive(n); });
}

void sim_runtime::partition(std::vector<bool> side, sim::vtime at,
                            sim::vtime lasting, const std::string& api) {
  auto cut_off = std::count(side.begin(), side.end(), true);
  if (cut_off == 0 || cut_off == world_.nodes())
    throw usage_error(api + ": name the nodes to cut off from the others "
                            "(not none, not all)");
  if (lasting <= 0)
    throw usage_error(api + ": a partition lasts a while; give a positive "
                            "time");
  world_.schedule(at, [this, side = std::move(side), lasting] {
    auto heal = world_.time() + lasting;
    world_.cut(side, heal);
    static const std::string none;
    for (int i = 0; i < world_.nodes(); ++i)
      if (side[static_cast<size_t>(i)])
        world_.record("partition", i, -1, none, 0, 0);
    // The side without node-0 cannot reach the head: past the failure
    // detector's time, the cluster takes its nodes for dead.
    std::vector<int> far;
    for (int i = 1; i < world_.nodes(); ++i)
      if (side[static_cast<size_t>(i)] != side[0] && world_.alive(i))
        far.push_back(i);
    if (lasting >= noticed)
      for (int i : far)
        kill_node(i, world_.time() + noticed, true);
    world_.schedule(heal, [this, side, far, lasting] {
      for (int i = 0; i < world_.nodes(); ++i)
        if (side[static_cast<size_t>(i)])
          world_.record("heal", i, -1, none, 0, 0);
      if (lasting >= noticed)
        for (int i : far)
          world_.revive(i);
    });
  });
}

void sim_runtime::slow_node(int n, double factor, sim::vtime at,
                            sim::vtime lasting) {
  world_.schedule(at, [this, n, factor, lasting] {
    world_.slow(n, factor);
    if (lasting > 0)
      world_.schedule(world_.time() + lasting,
                      [this, n] { world_.slow(n, 1); });
  });
}

void sim_runtime::plan_faults(const sim_options& opts) {
  for (auto& f : sim::read_faults(opts)) {
    std::vector<int> nodes;
    for (auto& id : f.nodes)
      nodes.push_back(node_named(id, f.source,
                                 f.what != sim::fault::kind::kill &&
                                   f.what != sim::fault::kind::restart));
    switch (f.what) {
      case sim::fault::kind::kill:
        kill_node(nodes[0], f.at);
        break;
      case sim::fault::kind::restart:
        restart_node(nodes[0], f.at);
        break;
      case sim::fault::kind::partition: {
        std::vector<bool> side(static_cast<size_t>(world_.nodes()), false);
        for (int i : nodes)
          side[static_cast<size_t>(i)] = true;
        partition(side, f.at, f.lasting, f.source);
        break;
      }
      case sim::fault::kind::slow:
        slow_node(nodes[0], f.factor, f.at, f.lasting);
        break;
    }
  }
  if (opts.chaos.empty())
    return;
  if (world_.nodes() < 2)
    throw usage_error("--sim-chaos needs a node besides node-0 to fault; "
                      "give --sim-nodes=2 or more");
  auto rates = sim::parse_chaos(opts.chaos);
  for (auto& [kind, rate] : {std::make_pair("kill", rates.kill),
                             std::make_pair("partition", rates.partition),
                             std::make_pair("slow", rates.slow)})
    if (rate > 0)
      next_chaos(kind, rate);
}

double sim_runtime::uniform(double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(world_.draw() >> 11) * 0x1p-53;
}

void sim_runtime::next_chaos(const std::string& kind, double rate) {
  // Poisson arrivals: exponential gaps of mean 1/rate.
  auto gap = -std::log(1 - uniform(0, 1)) / rate;
  auto at = world_.time() + static_cast<sim::vtime>(std::llround(gap * 1e9));
  auto seconds = [](double s) {
    return static_cast<sim::vtime>(std::llround(s * 1e9));
  };
  world_.schedule(
    at,
    [this, kind, rate, seconds] {
      int n = 1 + static_cast<int>(world_.draw() %
                                   static_cast<uint64_t>(world_.nodes() - 1));
      auto now = world_.time();
      if (kind == "kill") {
        if (world_.alive(n)) {
          kill_node(n, now);
          restart_node(n, now + seconds(uniform(0.5, 3)));
        }
      } else if (kind == "partition") {
        std::vector<bool> side(static_cast<size_t>(world_.nodes()), false);
        side[static_cast<size_t>(n)] = true;
        partition(side, now, seconds(uniform(0.1, 3)), "--sim-chaos");
      } else {
        slow_node(n, uniform(2, 5), now, seconds(uniform(1, 5)));
      }
      next_chaos(kind, rate);
    },
    true);
}

void sim_runtime::node_lost(int n, const std::string& why) {
  auto& node = world_.node_name(n);
  world_.set_known_down(n);
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
