#pragma once

// Ring peers: members of collective groups as typed CAF actors, spawnable
// by name on any node, for a driver that declares a group over actors it
// placed (Ray's create_collective_group) and drives them with messages.
//
//   std::vector<ring_peer> peers;
//   for (auto& node : {"node-1", "node-2"})
//     peers.push_back(spawn_ring_peer(node));
//   create_group(peers, "grads");
//   auto sum = lumen::call(peers[0], allreduce_atom::value, "grads", t0,
//                          reduce_op::sum);   // and the same on peers[1]
//
// Each peer runs on a thread of its own and is one member of every group
// it joined; its collectives are those of lumen/collective/collective.hpp (in
// place, on the tensor it was sent: in the sender's process that is the
// sender's storage, as for a PyTorch in-place collective; clone() to keep
// the input). A failed collective answers with an error whose text is the
// collective_error's (naming the group and the ranks); a peer whose
// process died, with actor_died.
//
// Any program that includes this header (or <lumen/ml.hpp>) can host
// ring peers: a driver, or a node started from the program itself.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "lumen/collective/collective.hpp"
#include "lumen/collective/ring.hpp"
#include "lumen/ml/tensor.hpp"
#include "lumen/ml/wire.hpp"

namespace lumen::collective {

using join_atom = caf::atom_constant<caf::atom("lcjoin")>;
using leave_atom = caf::atom_constant<caf::atom("lcleave")>;
using allreduce_atom = caf::atom_constant<caf::atom("lcallred")>;
using reduce_atom = caf::atom_constant<caf::atom("lcreduce")>;
using broadcast_atom = caf::atom_constant<caf::atom("lcbcast")>;
using allgather_atom = caf::atom_constant<caf::atom("lcallgat")>;
using reducescatter_atom = caf::atom_constant<caf::atom("lcredsca")>;
using barrier_atom = caf::atom_constant<caf::atom("lcbarrier")>;

/// The messages a ring peer handles; each names the group first.
///   join(group, world_size, rank): init_group, answered once all joined
///   leave(group): destroy_group
///   allreduce(group, t, op) -> t reduced over all members
///   reduce(group, t, dst_rank, op) -> t (reduced on dst_rank only)
///   broadcast(group, t, src_rank) -> src_rank's t
///   allgather(group, t) -> every member's t, in rank order
///   reducescatter(group, parts, op) -> the reduction of every member's
///     parts[rank]
///   barrier(group): answered once every member reached it
using ring_peer = caf::typed_actor<
  caf::reacts_to<join_atom, std::string, int32_t, int32_t>,
  caf::reacts_to<leave_atom, std::string>,
  caf::replies_to<allreduce_atom, std::string, ml::tensor,
                  reduce_op>::with<ml::tensor>,
  caf::replies_to<reduce_atom, std::string, ml::tensor, int32_t,
                  reduce_op>::with<ml::tensor>,
  caf::replies_to<broadcast_atom, std::string, ml::tensor,
                  int32_t>::with<ml::tensor>,
  caf::replies_to<allgather_atom, std::string,
                  ml::tensor>::with<std::vector<ml::tensor>>,
  caf::replies_to<reducescatter_atom, std::string, std::vector<ml::tensor>,
                  reduce_op>::with<ml::tensor>,
  caf::reacts_to<barrier_atom, std::string>>;

/// The name ring peers are registered under (LUMEN_BLOCKING_TYPED_ACTOR).
constexpr const char* ring_peer_name = "lumen.ring_peer";

/// Spawns a ring peer on the cluster node `node_id` (this process for
/// lumen::this_node_id()). Throws usage_error if the node's program does
/// not include this header.
ring_peer spawn_ring_peer(const std::string& node_id);

/// Makes `peers` the members of `group`, peer i its rank i, from a driver
/// (Ray's declarative create_collective_group): returns once every peer
/// joined, or throws the first peer's error (a taken name, a peer gone).
void create_group(const std::vector<ring_peer>& peers,
                  const std::string& group);

/// Every peer of `peers` leaves `group`; once all did, the name is free.
void destroy_group(const std::vector<ring_peer>& peers,
                   const std::string& group);

namespace detail {

/// Pulls the ring peer's registrations into every program that includes
/// this header, though the library is static.
bool ring_peer_registered();
inline const bool ring_peer_linked = ring_peer_registered();

} // namespace detail

} // namespace lumen::collective
