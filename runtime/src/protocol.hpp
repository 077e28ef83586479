#pragma once

// The messages Lumen processes exchange over CAF's middleman. Payloads are
// bytes from lumen's codec; CAF carries std::vector<char> as one raw block.
//
// This is the control plane; tasks and actor calls travel on the data plane
// (data_plane.hpp).
//
//   to a node manager (every node, the head included):
//     (hello, role, host, port, data port, resources) -> (assigned node id)
//     (nodes)                             -> (encoded vector<node_info>)
//     (spawn, class, ctor key, args, name, max_restarts) -> (actor)
//     (spawn typed, name, args, interface) -> (actor)    LUMEN_TYPED_ACTOR
//   to the head only:
//     (name, name, class, node id, actor) -> (true, or false if taken)
//     (lookup, name)          -> (found, class, node id, actor)
//     (actors, count)         a node reports how many actors it hosts
//
// Only peers that passed the gate with the cluster token get this far
// (gate.hpp, control_link.hpp).

#include <exception>
#include <string>

#include <caf/atom.hpp>

#include "lumen/detail/codec.hpp"

namespace lumen::detail {

using hello_atom = caf::atom_constant<caf::atom("lmhello")>;
using nodes_atom = caf::atom_constant<caf::atom("lmnodes")>;
using spawn_atom = caf::atom_constant<caf::atom("lmspawn")>;
using join_atom = caf::atom_constant<caf::atom("lmjoin")>;
using name_atom = caf::atom_constant<caf::atom("lmname")>;
using spawn_typed_atom = caf::atom_constant<caf::atom("lmspawnt")>;
using lookup_atom = caf::atom_constant<caf::atom("lmlookup")>;
using actors_atom = caf::atom_constant<caf::atom("lmactors")>;

/// Encodes a published error (task_error, actor_died, ...) for the wire.
bytes encode_error(const std::exception_ptr& err);

/// The exception an encoded error stands for.
std::exception_ptr decode_error(const bytes& payload);

} // namespace lumen::detail
