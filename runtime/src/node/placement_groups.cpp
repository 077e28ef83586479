// Placement groups: the public class, the layout of bundles over nodes, and
// the part of process_runtime (every role's) that reserves and removes
// them and places work in them. The bundles themselves are held by each
// node's keeper (bundle_keeper.hpp).
#include "node/placement_groups.hpp"

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>
#include <tuple>

#include <caf/all.hpp>

#include "lumen/caf_interop.hpp"
#include "lumen/errors.hpp"

#include "core/process_runtime.hpp"
#include "core/resource_ledger.hpp"
#include "node/bundle_keeper.hpp"
#include "transport/protocol.hpp"

namespace lumen {

namespace {

std::string new_group_id() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> any;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(any(rd)));
  return buf;
}

} // namespace

placement_group::placement_group(std::vector<bundle> bundles,
                                 placement_strategy strategy)
  : st_(std::make_shared<detail::placement_group_state>()) {
  if (bundles.empty())
    throw usage_error("placement_group: give it at least one bundle");
  for (auto& b : bundles) {
    detail::check_resources(b, "placement_group");
    if (b.empty())
      throw usage_error("placement_group: a bundle must ask for at least one "
                        "resource, e.g. {{\"cpu\", 1}}");
  }
  st_->id = new_group_id();
  st_->bundles = std::move(bundles);
  st_->strategy = strategy;
  detail::current_runtime().create_placement_group(st_);
}

std::string placement_group::bundle_node(size_t index) const {
  if (index >= st_->bundles.size())
    throw usage_error("bundle_node: bundle " + std::to_string(index) +
                      " is out of range; the group has " +
                      std::to_string(st_->bundles.size()));
  std::lock_guard<std::mutex> guard{st_->mtx};
  return st_->nodes.at(index);
}

namespace detail {

placement in_group(const placement_group& pg, int bundle_index) {
  if (bundle_index < -1 ||
      bundle_index >= static_cast<int>(pg.bundles().size()))
    throw usage_error("in_placement_group: bundle " +
                      std::to_string(bundle_index) +
                      " is out of range; the group has " +
                      std::to_string(pg.bundles().size()) + " (-1 for any)");
  return {pg.state(), bundle_index};
}

} // namespace detail

void remove_placement_group(const placement_group& pg) {
  detail::current_runtime().remove_placement_group(*pg.state());
}

} // namespace lumen

namespace lumen::detail {

namespace {

resource_request minus(resource_request a, const resource_request& b) {
  for (auto& [name, amount] : b)
    a[name] -= amount;
  return a;
}

const char* strategy_name(placement_strategy s) {
  switch (s) {
    case placement_strategy::pack:
      return "pack";
    case placement_strategy::spread:
      return "spread";
    case placement_strategy::strict_pack:
      return "strict_pack";
    case placement_strategy::strict_spread:
      return "strict_spread";
  }
  return "?";
}

usage_error infeasible_group(const std::string& gid, placement_strategy s,
                             const std::string& what) {
  return usage_error("placement group " + gid + " (" + strategy_name(s) +
                       ") cannot be placed: " + what +
                       "; ask for less, use a laxer strategy, or start "
                       "nodes with more (lumen start --resources "
                       "NAME=AMOUNT)",
                     errc::infeasible);
}

} // namespace

std::vector<std::string> plan_bundles(const std::vector<node_info>& nodes,
                                      const std::vector<resource_request>& b,
                                      placement_strategy strategy,
                                      const std::string& group_id) {
  struct candidate {
    const node_info* node;
    resource_request room_now;  // free as last reported, less our bundles
    resource_request room_ever; // its total, less our bundles
    size_t ours = 0;            // bundles of this group placed on it
  };
  std::vector<candidate> live;
  for (auto& n : nodes)
    if (n.alive)
      live.push_back({&n, minus(n.resources, n.used), n.resources});
  if (live.empty())
    throw actor_died("no live node in the cluster");
  bool packs = strategy == placement_strategy::pack ||
               strategy == placement_strategy::strict_pack;
  if (strategy == placement_strategy::strict_pack) {
    // All on one node: the sum of the bundles, placed as one.
    resource_request sum;
    for (auto& r : b)
      for (auto& [name, amount] : r)
        sum[name] += amount;
    const candidate* one = nullptr;
    for (auto& c : live)
      if (fits(sum, c.room_now, {})) {
        one = &c;
        break;
      }
    for (auto& c : live)
      if (one == nullptr && short_of(sum, c.room_ever).empty())
        one = &c;
    if (one == nullptr)
      throw infeasible_group(group_id, strategy,
                             "no live node has " + describe(sum) + " in all");
    return std::vector<std::string>(b.size(), one->node->id);
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < b.size(); ++i) {
    // Packing prefers the nodes holding most of the group already,
    // spreading those holding least; the sort is stable, so ties keep the
    // directory's order.
    std::vector<candidate*> order;
    for (auto& c : live)
      if (strategy != placement_strategy::strict_spread || c.ours == 0)
        order.push_back(&c);
    std::stable_sort(order.begin(), order.end(), [&](auto* x, auto* y) {
      return packs ? x->ours > y->ours : x->ours < y->ours;
    });
    candidate* best = nullptr;
    for (auto* c : order)
      if (fits(b[i], c->room_now, {})) {
        best = c;
        break;
      }
    for (auto* c : order)
      if (best == nullptr && short_of(b[i], c->room_ever).empty())
        best = c;
    if (best == nullptr) {
      auto whom = strategy == placement_strategy::strict_spread
                    ? " without a bundle of the group already"
                    : "";
      throw infeasible_group(group_id, strategy,
                             "bundle " + std::to_string(i) + " (" +
                               describe(b[i]) + ") fits on no live node" +
                               whom + " (" + std::to_string(live.size()) +
                               " live)");
    }
    best->room_now = minus(best->room_now, b[i]);
    best->room_ever = minus(best->room_ever, b[i]);
    ++best->ours;
    out.push_back(best->node->id);
  }
  return out;
}

void check_group_work(const placement& where, const resource_request& r) {
  auto& g = *where.group;
  {
    std::lock_guard<std::mutex> guard{g.mtx};
    if (g.removed)
      throw usage_error("placement group " + g.id +
                        " was removed; make a new one to place work in");
  }
  auto holds = [&](size_t i) { return short_of(r, g.bundles[i]).empty(); };
  if (where.bundle >= 0) {
    if (!holds(static_cast<size_t>(where.bundle)))
      throw usage_error(
        "the request " + describe(r) + " cannot be met: bundle " +
          std::to_string(where.bundle) + " of placement group " + g.id +
          " has " + describe(g.bundles[where.bundle]) +
          "; ask for less, or for another bundle",
        errc::infeasible);
    return;
  }
  for (size_t i = 0; i < g.bundles.size(); ++i)
    if (holds(i))
      return;
  throw usage_error("the request " + describe(r) +
                      " cannot be met: no bundle of placement group " + g.id +
                      " has that much",
                    errc::infeasible);
}

std::pair<placement, resource_request>
place_in_group(const placement& where, const resource_request& r) {
  auto& g = *where.group;
  if (g.ready->failed())
    std::rethrow_exception(g.ready->error());
  check_group_work(where, r);
  auto index = where.bundle;
  if (index < 0) {
    // Any bundle that holds it, round-robin.
    auto n = g.bundles.size();
    for (size_t k = 0; k < n; ++k) {
      auto i = g.next_bundle.fetch_add(1) % n;
      if (short_of(r, g.bundles[i]).empty()) {
        index = static_cast<int>(i);
        break;
      }
    }
  }
  std::string node;
  {
    std::lock_guard<std::mutex> guard{g.mtx};
    node = g.nodes.at(static_cast<size_t>(index));
  }
  return {node == this_node() ? placement{} : placement{placement::node, node},
          in_bundle(g.id, index, r)};
}

namespace {

constexpr auto release_timeout = std::chrono::seconds(10);

/// Marks `g` removed and fails its ready() if it is pending; the nodes of
/// its bundles, or none if it was removed already.
std::set<std::string> mark_removed(placement_group_state& g) {
  std::set<std::string> nodes;
  {
    std::lock_guard<std::mutex> guard{g.mtx};
    if (g.removed)
      return nodes;
    g.removed = true;
    nodes.insert(g.nodes.begin(), g.nodes.end());
  }
  g.ready->set_error(std::make_exception_ptr(usage_error(
    "placement group " + g.id + " was removed before it was ready")));
  return nodes;
}

} // namespace

caf::actor process_runtime::group_target(const std::string& node) {
  return node == this_node() ? bundle_keeper_ : manager_of(node);
}

void process_runtime::create_placement_group(
  const std::shared_ptr<placement_group_state>& g) {
  auto where = plan_bundles(nodes(), g->bundles, g->strategy, g->id);
  std::vector<caf::actor> targets;
  for (auto& node : where)
    targets.push_back(group_target(node));
  {
    std::lock_guard<std::mutex> guard{g->mtx};
    g->nodes = where;
  }
  auto left = std::make_shared<size_t>(where.size());
  run_as_requester([this, g, where, targets,
                    left](caf::event_based_actor* self) {
    for (size_t i = 0; i < targets.size(); ++i) {
      auto what = "bundle " + std::to_string(i) + " of placement group " +
                  g->id + " on node " + where[i];
      // A bundle that cannot be had fails the group, whose other bundles
      // are given back (a keeper refuses a reserve after the release).
      auto fail = [g, self, targets](std::exception_ptr e) {
        g->ready->set_error(std::move(e));
        if (!mark_removed(*g).empty())
          for (auto& t : targets)
            self->send(t, release_atom::value, g->id);
      };
      auto target = targets[i];
      auto token = watch(self, target, [fail, what] {
        fail(std::make_exception_ptr(
          actor_died("the node died before " + what + " was reserved")));
      });
      self
        ->request(target, caf::infinite, reserve_atom::value, g->id,
                  static_cast<int32_t>(i), encode(g->bundles[i]))
        .then(
          [this, g, left, target, token](bool) {
            unwatch(target.address(), token);
            if (--*left == 0)
              g->ready->set_value();
          },
          [this, self, fail, what, target, token](caf::error& err) {
            unwatch(target.address(), token);
            try {
              throw_control_error(self->system(), err, "cannot reserve " + what,
                                  errc::unreachable);
            } catch (...) {
              fail(std::current_exception());
            }
          });
    }
  });
}

void process_runtime::remove_placement_group(placement_group_state& g) {
  // Synchronous, unlike Ray's: once it returns, the group's work was told
  // to end on every node that answered. A node out of reach took its
  // bundles with it, or gives them back when it sees this process go.
  caf::scoped_actor self{system()};
  for (auto& node : mark_removed(g)) {
    try {
      self
        ->request(group_target(node), release_timeout, release_atom::value,
                  g.id)
        .receive([](bool) {}, [](caf::error&) {});
    } catch (const error&) {
    }
  }
}

void process_runtime::submit_to_bundle(std::shared_ptr<task_spec> t) {
  check_group_work(t->where, t->resources);
  auto ready = t->where.group->ready;
  ready->on_ready([this, t = std::move(t), ready]() mutable {
    try {
      std::tie(t->where, t->resources) = place_in_group(t->where, t->resources);
      submit_task(std::move(t));
    } catch (...) {
      t->result()->set_error(std::current_exception());
    }
  });
}

actor_options process_runtime::in_bundle_options(const actor_options& opts) {
  check_group_work(opts.where, opts.resources);
  opts.where.group->ready->wait();
  auto out = opts;
  std::tie(out.where, out.resources) =
    place_in_group(opts.where, opts.resources);
  return out;
}

} // namespace lumen::detail
