#include "collective/sim/sim_transport.hpp"

#include <cstring>
#include <utility>

#include <lumen/cluster.hpp>
#include <lumen/sim.hpp>

#include "collective/groups.hpp"

namespace lumen::collective::detail {

namespace {

/// A frame's header on a channel (net_link.hpp): what each message adds.
constexpr uint64_t header_bytes = 16;

/// The groups of the simulated run in progress, by name, while a member
/// holds them.
std::map<std::string, std::weak_ptr<sim_hub>>& hubs() {
  static std::map<std::string, std::weak_ptr<sim_hub>> all;
  return all;
}

std::string missing_ranks(const sim_hub& h) {
  std::string out;
  for (int q = 0; q < h.world; ++q)
    if (h.nodes[static_cast<size_t>(q)].empty())
      out += (out.empty() ? "" : ", ") + std::to_string(q);
  return out;
}

} // namespace

sim_transport::sim_transport(std::shared_ptr<sim_hub> hub, int rank,
                             std::chrono::milliseconds timeout)
  : hub_(std::move(hub))
  , rank_(rank)
  , timeout_(timeout)
  , label_("collective " + hub_->name) {}

sim_transport::~sim_transport() {
  hub_->nodes[static_cast<size_t>(rank_)].clear();
}

void sim_transport::send(int peer, sim_hub::message m) {
  auto bytes =
    header_bytes + (m.is_op ? sizeof(op_descriptor) : m.bytes.size());
  // mutable: the message moves into the peer's box; a const capture would
  // copy its bytes once more on every delivery.
  lumen::sim::send_to(
    hub_->nodes[static_cast<size_t>(peer)], bytes, label_,
    [hub = hub_, from = rank_, peer, m = std::move(m)]() mutable {
      hub->between(from, peer).push_back(std::move(m));
    });
}

void sim_transport::post(int peer, const void* data, size_t n) {
  if (n == 0)
    return; // nothing for the peer to read: a receive takes bytes, not messages
  sim_hub::message m;
  auto from = static_cast<const char*>(data);
  m.bytes.assign(from, from + n);
  send(peer, std::move(m));
}

void sim_transport::post_op(int peer, const op_descriptor& d) {
  sim_hub::message m;
  m.is_op = true;
  m.op = d;
  send(peer, std::move(m));
}

sim_hub::message& sim_transport::next_from(int peer, bool op,
                                           const char* doing) {
  auto& h = *hub_;
  auto& box = h.between(peer, rank_);
  auto& mine = h.broken[static_cast<size_t>(rank_)];
  auto& node = h.nodes[static_cast<size_t>(peer)];
  auto down = [&] { return !node.empty() && lumen::sim::known_down(node); };
  bool came = lumen::sim::wait_for(
    [&] { return !box.empty() || mine || down(); }, timeout_);
  if (mine)
    throw *mine;
  auto who = "rank " + std::to_string(peer);
  if (box.empty() && down())
    fail("group '" + h.name + "': " + who + " is gone (its node " + node +
           " died) during " + doing + "; rank " + std::to_string(rank_) +
           " lost its link to it",
         errc::peer_lost);
  if (!came)
    fail("group '" + h.name + "': rank " + std::to_string(rank_) + " waited " +
           std::to_string(timeout_.count()) + " ms for " + who + " during " +
           doing + ", which sent nothing; is it calling the same collective?",
         errc::timeout);
  auto& m = box.front();
  if (m.is_op != op)
    fail("group '" + h.name + "': " + who +
           (op ? " sent data where rank " + std::to_string(rank_) +
                   " expected the start of "
               : " started another operation while rank " +
                   std::to_string(rank_) + " still expected data of ") +
           doing +
           "; every rank must call the same collectives in the same order",
         errc::mismatch);
  return m;
}

void sim_transport::recv(int peer, void* into, size_t n, const char* doing) {
  auto out = static_cast<char*>(into);
  auto& taken =
    hub_->front_taken[static_cast<size_t>(peer * hub_->world + rank_)];
  while (n > 0) {
    auto& m = next_from(peer, false, doing);
    auto k = std::min(n, m.bytes.size() - taken);
    std::memcpy(out, m.bytes.data() + taken, k);
    out += k;
    n -= k;
    taken += k;
    if (taken == m.bytes.size()) {
      hub_->between(peer, rank_).pop_front();
      taken = 0;
    }
  }
}

op_descriptor sim_transport::recv_op(int peer, const char* doing) {
  auto d = next_from(peer, true, doing).op;
  hub_->between(peer, rank_).pop_front();
  return d;
}

void sim_transport::start(op_descriptor mine, bool same_op,
                          const std::string& problem, const void* payload,
                          size_t payload_bytes) {
  stamp(mine);
  mine.invalid = problem.empty() ? 0 : 1;
  mine.inline_bytes = payload != nullptr ? payload_bytes : 0;
  agree_all_to_all(*this, mine, same_op, problem,
                   [&](int p, const op_descriptor& d) {
                     post_op(p, d);
                     if (payload != nullptr)
                       post(p, payload, payload_bytes);
                   });
}

void sim_transport::agree_by_doubling(op_descriptor mine, bool same_op,
                                      const std::string& problem,
                                      const doubling_data* data) {
  start_then_rounds(
    mine, same_op, problem, data,
    [this](int p, const char* bytes, size_t n) { post(p, bytes, n); });
}

void sim_transport::exchange(int right, int left, exchange_plan& plan,
                             const char* doing) {
  // A posted piece is a copy: the places the plan waits to see leave are
  // free at once, so each piece is taken in as soon as it comes.
  for (size_t i = 0;; ++i) {
    for (; !plan.out.empty(); plan.out.pop_front())
      post(right, plan.out.front().data, plan.out.front().n);
    if (i == plan.pieces_in)
      break;
    auto p = plan.where(i);
    recv(left, p.data, p.n, doing);
    plan.done(i);
  }
}

void sim_transport::fail(const std::string& why, errc code) {
  auto& h = *hub_;
  auto& mine = h.broken[static_cast<size_t>(rank_)];
  if (!mine) {
    mine = collective_error(why, code);
    // The peers hear of it by message, as a channel's abort frame tells.
    for (int p = 0; p < world(); ++p) {
      auto& node = h.nodes[static_cast<size_t>(p)];
      if (p == rank_ || node.empty())
        continue;
      lumen::sim::send_to(node, header_bytes + why.size(), label_,
                          [hub = hub_, p, cause = *mine] {
                            auto& theirs = hub->broken[static_cast<size_t>(p)];
                            if (!theirs)
                              theirs = cause;
                          });
    }
  }
  throw *mine;
}

std::shared_ptr<sim_transport>
join_simulated(const std::string& name, int world, int rank,
               std::chrono::milliseconds timeout) {
  auto run = lumen::sim::run_number();
  auto& slot = hubs()[name];
  auto hub = slot.lock();
  if (!hub || hub->run != run) {
    hub = std::make_shared<sim_hub>();
    hub->name = name;
    hub->world = world;
    hub->run = run;
    hub->nodes.resize(static_cast<size_t>(world));
    hub->boxes.resize(static_cast<size_t>(world * world));
    hub->front_taken.resize(static_cast<size_t>(world * world), 0);
    hub->broken.resize(static_cast<size_t>(world));
    slot = hub;
  }
  if (hub->world != world)
    throw collective_error(
      "group '" + name + "' has " + std::to_string(hub->world) +
        " members, and this one says " + std::to_string(world) +
        "; every member must pass the same world_size",
      errc::mismatch);
  auto& node = hub->nodes[static_cast<size_t>(rank)];
  if (!node.empty())
    throw collective_error("rank " + std::to_string(rank) + " of group '" +
                             name +
                             "' is taken: two members claim it; give each "
                             "member its own rank",
                           errc::mismatch);
  node = lumen::this_node_id();
  auto t = std::make_shared<sim_transport>(hub, rank, timeout);
  if (!lumen::sim::wait_for([&] { return missing_ranks(*hub).empty(); },
                            timeout))
    throw collective_error("group '" + name + "': rank " +
                             std::to_string(rank) + " waited " +
                             std::to_string(timeout.count()) +
                             " ms for rank(s) " + missing_ranks(*hub) +
                             ", which did not come; start every member, "
                             "each with its own rank",
                           errc::timeout);
  return t;
}

std::map<std::string, membership>& simulated_groups() {
  // By actor, for this run only: the last run's memberships go with it.
  static uint64_t run = 0;
  static std::map<std::string, std::map<std::string, membership>> all;
  if (run != lumen::sim::run_number()) {
    all.clear();
    run = lumen::sim::run_number();
  }
  return all[lumen::sim::running_actor()];
}

} // namespace lumen::collective::detail
