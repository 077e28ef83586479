#include "collective/groups.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

#include <lumen/cluster.hpp>
#include <lumen/init.hpp>
#include <lumen/kv.hpp>
#include <lumen/sim.hpp>

#include "collective/sim/sim_transport.hpp"
#include "collective/threads/threads_transport.hpp"

namespace lumen::collective {

namespace detail {

namespace {

struct group_registry {
  std::mutex mtx;
  std::map<std::string, std::shared_ptr<local_group>> groups;
  // Timeouts set before a member of the group joined.
  std::map<std::string, std::chrono::milliseconds> timeouts;
};

group_registry& registry() {
  static group_registry r;
  return r;
}

/// Gives `m`'s rank of group `name` up, once its queued operations ran;
/// the last member to leave frees the name.
void leave(const std::string& name, const membership& m) {
  if (m.lane)
    m.lane->drain();
  if (!m.group)
    return; // its links close with the last copy of the membership
  if (!m.group->leave(m.rank))
    return;
  auto& reg = registry();
  std::lock_guard<std::mutex> guard{reg.mtx};
  auto i = reg.groups.find(name);
  if (i != reg.groups.end() && i->second == m.group)
    reg.groups.erase(i);
}

/// The groups a thread is a member of; a thread that ends leaves them, so
/// that its rank can be taken again and the others hear of it.
struct thread_groups {
  std::map<std::string, membership> groups;

  ~thread_groups() {
    for (auto& [name, m] : groups)
      leave(name, m);
  }
};

std::map<std::string, membership>& my_groups() {
  if (lumen::sim::active())
    return simulated_groups();
  thread_local thread_groups mine;
  return mine.groups;
}

/// Where the calling actor stands in `group` as create_group declared it.
struct declared_place {
  int world = 0;
  int rank = 0;
  backend where = backend::automatic;
};

std::string declaration_key(const std::string& group) {
  return "lumen.collective.group/" + group;
}

/// The calling actor's place in `group`'s declaration; nothing if this
/// thread runs no actor or `group` is not declared. Throws
/// `collective_error` if it is declared for other actors.
std::optional<declared_place> place_in_declaration(const std::string& group) {
  auto me = lumen::current_actor_id();
  if (me.empty() || !lumen::is_initialized())
    return std::nullopt;
  auto text = lumen::kv::get(declaration_key(group));
  if (!text)
    return std::nullopt;
  std::istringstream in{*text};
  int where = 0;
  in >> where;
  std::vector<std::string> ids;
  for (std::string id; in >> id;)
    ids.push_back(id);
  if (!in.eof() || where < 0 || where > static_cast<int>(backend::processes) ||
      ids.empty())
    throw collective_error("the declaration of group '" + group + "' (" +
                             declaration_key(group) +
                             " in the key-value store) is damaged; erase it "
                             "and call create_group again",
                           errc::usage);
  auto i = std::find(ids.begin(), ids.end(), me);
  if (i == ids.end())
    throw collective_error("group '" + group + "' was declared (create_group)" +
                             " for " + std::to_string(ids.size()) +
                             " actors, and this actor (" + me +
                             ") is not one of them; pass its handle to "
                             "create_group, or use another group name",
                           errc::usage);
  return declared_place{static_cast<int>(ids.size()),
                        static_cast<int>(i - ids.begin()),
                        static_cast<backend>(where)};
}

[[noreturn]] void throw_not_a_member(const std::string& group) {
  throw collective_error("this thread is not a member of group '" + group +
                           "'; call lumen::collective::init_group(world_size, "
                           "rank, \"" +
                           group +
                           "\") on it first, or declare the group from the "
                           "driver with create_group(actors, \"" +
                           group + "\")",
                         errc::usage);
}

} // namespace

membership& member_of(const std::string& group) {
  auto& mine = my_groups();
  auto i = mine.find(group);
  if (i != mine.end())
    return i->second;
  auto place = place_in_declaration(group);
  if (!place)
    throw_not_a_member(group);
  init_group(place->world, place->rank, group, place->where);
  auto& m = mine.at(group);
  m.declared = true;
  return m;
}

membership& caught_up(const std::string& group) {
  auto& m = member_of(group);
  if (m.net)
    if (auto* a = m.net->open_segment())
      a->finish_all();
  return m;
}

const membership& settled(const std::string& group) {
  auto& m = caught_up(group);
  if (m.lane)
    m.lane->drain();
  return m;
}

} // namespace detail

using detail::declaration_key;
using detail::join_simulated;
using detail::leave;
using detail::local_group;
using detail::make_recorder;
using detail::member_of;
using detail::membership;
using detail::my_groups;
using detail::net_group;
using detail::place_in_declaration;
using detail::registry;
using detail::threads_transport;
using detail::throw_not_a_member;

void set_timeout(const std::string& group, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0)
    throw collective_error("group '" + group + "': a timeout of " +
                             std::to_string(timeout.count()) +
                             " ms; give a positive one (the default is 30 s)",
                           errc::usage);
  auto& mine = my_groups();
  auto i = mine.find(group);
  if (i == mine.end()) {
    auto& reg = registry();
    std::lock_guard<std::mutex> guard{reg.mtx};
    reg.timeouts[group] = timeout;
    return;
  }
  i->second.over->set_timeout(timeout);
}

namespace {

bool in_a_cluster() {
  return lumen::is_initialized() && lumen::this_node_id() != "local";
}

/// The timeout set for `group` before this member joined, if any.
std::optional<std::chrono::milliseconds>
initial_timeout(const std::string& group) {
  auto& reg = registry();
  std::lock_guard<std::mutex> guard{reg.mtx};
  auto i = reg.timeouts.find(group);
  if (i == reg.timeouts.end())
    return std::nullopt;
  return i->second;
}

membership join_threads(int world_size, int rank, const std::string& group) {
  std::shared_ptr<local_group> g;
  {
    auto& reg = registry();
    std::lock_guard<std::mutex> guard{reg.mtx};
    auto& slot = reg.groups[group];
    if (!slot)
      slot = std::make_shared<local_group>(group, world_size);
    g = slot;
  }
  if (g->world() != world_size)
    throw collective_error(
      "group '" + group + "' has " + std::to_string(g->world()) +
        " members, and this one says " + std::to_string(world_size) +
        "; every member must pass the same world_size",
      errc::mismatch);
  if (!g->join(rank))
    throw collective_error("rank " + std::to_string(rank) + " of group '" +
                             group +
                             "' is taken: two members claim it; give each "
                             "member its own rank",
                           errc::mismatch);
  return {g, rank, nullptr, nullptr,
          std::make_shared<threads_transport>(g, rank)};
}

} // namespace

void init_group(int world_size, int rank, const std::string& group,
                backend where) {
  if (world_size < 1)
    throw collective_error("group '" + group + "' needs at least one member (" +
                             "world_size " + std::to_string(world_size) + ")",
                           errc::usage);
  if (rank < 0 || rank >= world_size)
    throw collective_error(
      "rank " + std::to_string(rank) + " is out of range for group '" + group +
        "' of " + std::to_string(world_size) + " members (ranks 0 to " +
        std::to_string(world_size - 1) + ")",
      errc::usage);
  if (my_groups().count(group))
    throw collective_error("this thread is a member of group '" + group +
                             "' already (rank " +
                             std::to_string(my_groups()[group].rank) +
                             "); destroy_group first to join again",
                           errc::usage);
  if (where == backend::automatic)
    where = in_a_cluster() ? backend::processes : backend::threads;
  auto timeout = initial_timeout(group);
  membership m;
  if (lumen::sim::active()) {
    // Every backend is the simulated network's: the members are on
    // simulated nodes, wherever the script said.
    m.over = join_simulated(group, world_size, rank,
                            timeout.value_or(std::chrono::milliseconds(30000)));
    m.rank = rank;
  } else if (where == backend::threads) {
    m = join_threads(world_size, rank, group);
    if (timeout)
      m.group->set_timeout(*timeout);
  } else {
    if (!lumen::is_initialized())
      throw collective_error("group '" + group +
                               "' uses the processes backend, whose members "
                               "meet through Lumen: call lumen::init first",
                             errc::usage);
    m.net = std::make_shared<net_group>(
      group, world_size, rank,
      timeout.value_or(std::chrono::milliseconds(30000)));
    m.rank = rank;
    m.over = m.net;
  }
  // A simulated run keeps no records: it replays instead.
  if (!lumen::sim::active())
    m.over->record_as(make_recorder(group, rank, world_size,
                                    m.group ? "threads" : "processes"));
  my_groups()[group] = std::move(m);
}

void declare_group(const std::vector<std::string>& actor_ids,
                   const std::string& group, backend where) {
  if (actor_ids.empty())
    throw collective_error("create_group: group '" + group +
                             "' needs at least one actor",
                           errc::usage);
  std::string text = std::to_string(static_cast<int>(where));
  for (size_t i = 0; i < actor_ids.size(); ++i) {
    auto first = std::find(actor_ids.begin(), actor_ids.end(), actor_ids[i]);
    if (first != actor_ids.begin() + static_cast<std::ptrdiff_t>(i))
      throw collective_error(
        "create_group: group '" + group + "' lists one actor twice (ranks " +
          std::to_string(first - actor_ids.begin()) + " and " +
          std::to_string(i) + "); give each rank an actor of its own",
        errc::usage);
    text += "\n" + actor_ids[i];
  }
  if (!lumen::kv::put(declaration_key(group), text, false))
    throw collective_error("create_group: group '" + group +
                             "' is declared already; a member's "
                             "destroy_group(\"" +
                             group + "\") withdraws it",
                           errc::usage);
}

void destroy_group(const std::string& group) {
  auto& mine = my_groups();
  auto i = mine.find(group);
  if (i == mine.end()) {
    // Declared for this actor but never used: only the declaration goes.
    if (!place_in_declaration(group))
      throw_not_a_member(group);
    lumen::kv::erase(declaration_key(group));
    return;
  }
  auto m = i->second;
  mine.erase(i);
  if (m.declared) {
    try {
      lumen::kv::erase(declaration_key(group));
    } catch (const lumen::error&) {
      // The head is lost, and its store with it.
    }
  }
  leave(group, m);
}

bool is_group_initialized(const std::string& group) {
  return my_groups().count(group) > 0;
}

namespace {

/// This member's rank and its group's size: from its membership, or before
/// it joined, from the group's declaration (asking does not join).
detail::declared_place place_of(const std::string& group) {
  auto& mine = my_groups();
  if (auto i = mine.find(group); i != mine.end())
    return {i->second.world(), i->second.rank, backend::automatic};
  if (auto place = place_in_declaration(group))
    return *place;
  throw_not_a_member(group);
}

} // namespace

int get_rank(const std::string& group) {
  return place_of(group).rank;
}

int get_world_size(const std::string& group) {
  return place_of(group).world;
}

backend backend_of(const std::string& group) {
  return member_of(group).group ? backend::threads : backend::processes;
}

traffic traffic_of(const std::string& group) {
  auto& m = member_of(group);
  if (!m.net)
    return {};
  auto t = m.net->links().traffic();
  return {t.sent, t.received};
}

} // namespace lumen::collective
