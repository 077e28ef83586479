#include "node/bundle_keeper.hpp"

#include <cctype>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "lumen/errors.hpp"

#include "transport/protocol.hpp"

namespace lumen::detail {

namespace {

// Work placed in a bundle asks for a share of its marker: up to a million
// pieces of work at once per bundle.
constexpr double marker_total = 1000;
constexpr double marker_share = 0.001;

std::string bundle_name(const std::string& name, int index,
                        const std::string& gid) {
  return name + "_group_" + std::to_string(index) + "_" + gid;
}

// A bundle's resources, granted by the ledger on another thread.
struct bundle_granted {
  std::string gid;
  int index;
  resource_ledger::grant held;
};

} // namespace

} // namespace lumen::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lumen::detail::bundle_granted)

namespace lumen::detail {

namespace {

// `r` under the bundle's names, with `marker` of its marker.
resource_request renamed(const std::string& gid, int index,
                         const resource_request& r, double marker) {
  resource_request out;
  for (auto& [name, amount] : r)
    out[bundle_name(name, index, gid)] = amount;
  out[bundle_name("bundle", index, gid)] = marker;
  return out;
}

} // namespace

resource_request bundle_offer(const std::string& gid, int index,
                              const resource_request& bundle) {
  return renamed(gid, index, bundle, marker_total);
}

resource_request in_bundle(const std::string& gid, int index,
                           const resource_request& r) {
  return renamed(gid, index, r, marker_share);
}

bool is_bundle_resource(const std::string& name) {
  return name.find("_group_") != std::string::npos;
}

namespace {

struct reservation {
  resource_request bundle;
  caf::response_promise rp;    // until the bundle is held
  resource_ledger::grant held; // the bundle's share of the process's
  bool granted = false;        // (a grant holds no pointer)
};

struct group_entry {
  caf::actor_addr owner;
  std::map<int, reservation> bundles;
};

struct keeper_state {
  resource_ledger* ledger = nullptr;
  std::map<std::string, group_entry> groups;
  // Groups removed here: a reserve request that comes after the release
  // (from another sender, or late) is refused. A few bytes per group.
  std::set<std::string> released;
  static inline const char* name = "lumen.bundle_keeper";
};

using keeper_actor = caf::stateful_actor<keeper_state>;

// Group ids become parts of resource names: short, and of plain letters.
bool valid_group_id(const std::string& gid) {
  if (gid.empty() || gid.size() > 64)
    return false;
  for (char c : gid)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-')
      return false;
  return true;
}

void release(keeper_actor* self, const std::string& gid,
             const std::string& why) {
  auto& st = self->state;
  st.released.insert(gid);
  auto i = st.groups.find(gid);
  if (i == st.groups.end())
    return;
  auto entry = std::move(i->second);
  st.groups.erase(i);
  std::vector<std::string> names;
  for (auto& [index, r] : entry.bundles) {
    if (r.granted) {
      for (auto& [name, amount] : bundle_offer(gid, index, r.bundle))
        names.push_back(name);
    } else if (r.rp.pending()) {
      r.rp.deliver(make_control_error(
        errc::usage, "placement group " + gid + " was removed (" + why +
                       ") before bundle " + std::to_string(index) +
                       " was reserved"));
    }
  }
  // Ends the work holding the bundles; the reservations go with `entry`.
  st.ledger->withdraw(names,
                      "placement group " + gid + " was removed (" + why + ")");
}

caf::behavior keeper(keeper_actor* self, resource_ledger* ledger) {
  self->state.ledger = ledger;
  self->set_down_handler([=](caf::down_msg& msg) {
    std::vector<std::string> owned;
    for (auto& [gid, entry] : self->state.groups)
      if (entry.owner == msg.source)
        owned.push_back(gid);
    for (auto& gid : owned)
      release(self, gid, "the process that made it ended");
  });
  return {
    [=](reserve_atom, const std::string& gid, int32_t index,
        const bytes& request) {
      // The maker, before the promise takes the sender over.
      auto owner = caf::actor_cast<caf::actor_addr>(self->current_sender());
      auto rp = self->make_response_promise();
      auto& st = self->state;
      resource_request bundle;
      try {
        if (!valid_group_id(gid) || index < 0 || index > 1'000'000)
          throw usage_error("a reserve request: bad group id or bundle index");
        bundle = std::get<0>(decode<resource_request>(request));
        check_resources(bundle, "a reserve request");
        if (st.released.count(gid) > 0)
          throw usage_error("placement group " + gid + " was removed");
        st.ledger->require_feasible(bundle, "this node");
      } catch (...) {
        rp.deliver(control_refusal(std::current_exception()));
        return rp;
      }
      auto& entry = st.groups[gid];
      if (entry.bundles.empty()) {
        entry.owner = owner;
        if (auto h = caf::actor_cast<caf::actor>(owner))
          self->monitor(h);
      }
      if (entry.bundles.count(index) > 0) {
        rp.deliver(
          make_control_error(errc::usage, "bundle " + std::to_string(index) +
                                            " of placement group " + gid +
                                            " is reserved already"));
        return rp;
      }
      entry.bundles[index] = reservation{bundle, rp, nullptr, false};
      auto me = caf::actor_cast<caf::actor>(self);
      st.ledger->acquire(bundle, [me, gid, index](resource_ledger::grant g) {
        caf::anon_send(me, bundle_granted{gid, index, std::move(g)});
      });
      return rp;
    },
    [=](bundle_granted& m) {
      auto& st = self->state;
      auto i = st.groups.find(m.gid);
      if (i == st.groups.end())
        return; // released meanwhile: the grant goes with the message
      auto& r = i->second.bundles.at(m.index);
      r.held = std::move(m.held);
      r.granted = true;
      st.ledger->offer(bundle_offer(m.gid, m.index, r.bundle));
      r.rp.deliver(true);
    },
    [=](release_atom, const std::string& gid) {
      release(self, gid, "remove_placement_group");
      return true;
    },
  };
}

} // namespace

caf::actor spawn_bundle_keeper(caf::actor_system& sys,
                               resource_ledger& ledger) {
  return sys.spawn(keeper, &ledger);
}

} // namespace lumen::detail
