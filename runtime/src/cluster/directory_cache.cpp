#include "cluster/directory_cache.hpp"

#include <algorithm>

#include <caf/all.hpp>

#include "lumen/errors.hpp"

#include "core/resource_ledger.hpp"
#include "node/bundle_keeper.hpp"
#include "transport/protocol.hpp"

namespace lumen::detail {

namespace {

constexpr auto fresh_for = std::chrono::seconds(1);

} // namespace

directory_cache::directory_cache(caf::actor_system& sys, head_link& head)
  : sys_(sys)
  , head_(head) {}

std::vector<node_info> directory_cache::fetch() {
  auto h = head_.get();
  caf::scoped_actor self{sys_};
  std::vector<node_info> out;
  // A busy head (a loaded machine, a node's death to handle) may answer
  // late; one that is gone its link reports, so only then is a late
  // answer given up on at once.
  for (int attempt = 1;; ++attempt) {
    caf::error failed;
    self->request(h, head_timeout, nodes_atom::value)
      .receive(
        [&](bytes& b) { out = std::get<0>(decode<std::vector<node_info>>(b)); },
        [&](caf::error& err) { failed = std::move(err); });
    if (!failed)
      break;
    if (failed != caf::sec::request_timeout || attempt == 3 || head_.lost())
      throw head_.unreachable(sys_.render(failed));
  }
  std::lock_guard<std::mutex> guard{mtx_};
  dead_.erase("head"); // it just answered
  for (auto& n : out)
    if (dead_.count(n.id) > 0)
      n.alive = false;
  nodes_ = out;
  fetched_at_ = std::chrono::steady_clock::now();
  return out;
}

void directory_cache::refresh() {
  bool stale;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    // Without the head, the last directory still places work on live
    // nodes; a node that died since is known dead from its own link.
    if (!nodes_.empty() && head_.lost())
      return;
    stale = nodes_.empty() ||
            std::chrono::steady_clock::now() - fetched_at_ > fresh_for;
  }
  if (stale)
    fetch();
}

void directory_cache::learn_of(const std::string& node_id) {
  if (!find(node_id))
    fetch(); // it may have joined since the last look
}

std::optional<node_info> directory_cache::find(const std::string& node_id) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& n : nodes_)
    if (n.id == node_id)
      return n;
  return std::nullopt;
}

void directory_cache::mark_dead(const std::string& node_id) {
  std::lock_guard<std::mutex> guard{mtx_};
  dead_.insert(node_id);
  for (auto& n : nodes_)
    if (n.id == node_id)
      n.alive = false;
}

std::string directory_cache::pick(const placement& where,
                                  const resource_request& resources) {
  refresh();
  if (where.kind == placement::node)
    learn_of(where.node_id);
  std::lock_guard<std::mutex> guard{mtx_};
  if (where.kind == placement::node) {
    for (auto& n : nodes_)
      if (n.id == where.node_id) {
        if (!n.alive)
          throw actor_died("node " + n.id +
                           " is dead; pick a live one from "
                           "lumen::nodes()");
        // A bundle's resources appear in the node's total only once its
        // next report is in: the node checks them itself.
        if (std::none_of(resources.begin(), resources.end(),
                         [](auto& r) { return is_bundle_resource(r.first); }))
          require_feasible(resources, n.resources, "node " + n.id);
        return n.id;
      }
    throw usage_error("there is no node '" + where.node_id +
                      "' in the cluster; lumen::nodes() lists them");
  }
  std::vector<const node_info*> live, able, free;
  for (auto& n : nodes_) {
    if (!n.alive)
      continue;
    live.push_back(&n);
    if (!short_of(resources, n.resources).empty())
      continue;
    able.push_back(&n);
    if (fits(resources, n.resources, n.used))
      free.push_back(&n);
  }
  if (live.empty())
    throw actor_died("no live node in the cluster");
  if (able.empty()) {
    std::string lacks;
    for (auto* n : live)
      lacks += (lacks.empty() ? "" : ", ") + n->id + " too little " +
               short_of(resources, n->resources);
    throw usage_error("the request " + describe(resources) +
                        " cannot be met: no live node has that much (" + lacks +
                        "); ask for less, or start a node with more "
                        "(lumen start --resources NAME=AMOUNT)",
                      errc::infeasible);
  }
  auto& from = free.empty() ? able : free;
  return from[next_spread_++ % from.size()]->id;
}

} // namespace lumen::detail
