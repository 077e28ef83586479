#pragma once

#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "lumen/detail/runtime.hpp"

#include "core/resource_ledger.hpp"

namespace lumen::detail {

/// The resources bundle `index` of placement group `gid` offers on its node
/// while it is reserved there: each of `bundle`'s, named as Ray names them
/// (cpu_group_0_<gid>), and a marker (bundle_group_0_<gid>) of which work
/// placed in the bundle asks a little, so that work asking for nothing
/// else is bound to the bundle too.
resource_request bundle_offer(const std::string& gid, int index,
                              const resource_request& bundle);

/// `r` as work placed in that bundle asks for it.
resource_request in_bundle(const std::string& gid, int index,
                           const resource_request& r);

/// True for a resource name a bundle offers.
bool is_bundle_resource(const std::string& name);

/// Spawns the actor that holds this process's share of placement groups
/// (the node manager hands it reserve and release requests; see
/// protocol.hpp). A bundle is reserved once `ledger` grants its resources;
/// then the ledger offers the bundle's own. Releasing a group withdraws
/// them, which ends the work holding them (its grants are revoked), and
/// gives the reservation back. A group whose maker's process ends is
/// released with it.
caf::actor spawn_bundle_keeper(caf::actor_system& sys, resource_ledger& ledger);

} // namespace lumen::detail
