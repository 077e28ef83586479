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
//     (spawn, class, ctor key, args, name, max_restarts,
//      max_task_retries, max_concurrency, detached,
//      encoded resource_request)         -> (actor)
//     (spawn typed, name, args, interface) -> (actor)    LUMEN_TYPED_ACTOR
//     (reserve, group id, bundle index, encoded resource_request)
//                                   -> (ok) once the bundle is held there
//     (release, group id)          -> (true) once the group's bundles
//                                   there are given back and their work
//                                   told to end
//   to the head only:
//     (name, name, class, node id, actor) -> (true, or false if taken)
//     (lookup, name)          -> (found, class, node id, actor)
//     (alive, node id)        -> (whether the head counts it alive)
//     (actors, count)         a node reports how many actors it hosts
//     (used, encoded (total, used) resource_requests) what a node offers
//                             and what its work holds of that
//     (endpoint, name, address, owner) -> (true, or false if taken)
//     (find endpoint, name)   -> (found, address)
//     (drop endpoint, name, owner)   frees a channel name
//
// Only peers that passed the gate with the cluster token get this far
// (gate.hpp, control_link.hpp).

#include <exception>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/error.hpp>

#include "lumen/detail/codec.hpp"

namespace lumen::detail {

using hello_atom = caf::atom_constant<caf::atom("lmhello")>;
using nodes_atom = caf::atom_constant<caf::atom("lmnodes")>;
using spawn_atom = caf::atom_constant<caf::atom("lmspawn")>;
using join_atom = caf::atom_constant<caf::atom("lmjoin")>;
using name_atom = caf::atom_constant<caf::atom("lmname")>;
using spawn_typed_atom = caf::atom_constant<caf::atom("lmspawnt")>;
using lookup_atom = caf::atom_constant<caf::atom("lmlookup")>;
using process_node_atom = caf::atom_constant<caf::atom("lmprocnd")>;
using alive_atom = caf::atom_constant<caf::atom("lmalive")>;
using actors_atom = caf::atom_constant<caf::atom("lmactors")>;
using used_atom = caf::atom_constant<caf::atom("lmused")>;
using endpoint_atom = caf::atom_constant<caf::atom("lmepbind")>;
using find_endpoint_atom = caf::atom_constant<caf::atom("lmepfind")>;
using drop_endpoint_atom = caf::atom_constant<caf::atom("lmepdrop")>;
using kv_put_atom = caf::atom_constant<caf::atom("lmkvput")>;
using kv_get_atom = caf::atom_constant<caf::atom("lmkvget")>;
using kv_erase_atom = caf::atom_constant<caf::atom("lmkvdel")>;
using kv_keys_atom = caf::atom_constant<caf::atom("lmkvkeys")>;
using reserve_atom = caf::atom_constant<caf::atom("lmpgres")>;
using release_atom = caf::atom_constant<caf::atom("lmpgrel")>;

/// A control-plane refusal: a Lumen error code and a sentence saying what
/// happened and what to do, for the peer to branch on and show.
caf::error make_control_error(errc code, std::string text);

/// The refusal for a request that threw `err` while it was handled: a
/// Lumen error keeps its code, anything else is misuse (a malformed
/// payload).
caf::error control_refusal(const std::exception_ptr& err);

/// Throws the Lumen error for a failed control-plane request: the code and
/// text of a Lumen refusal (the class the code is thrown as), else `fallback`
/// with CAF's rendering appended. `context` ("cannot start Counter on
/// node-1") leads the message.
[[noreturn]] void throw_control_error(caf::actor_system& sys,
                                      const caf::error& err,
                                      const std::string& context,
                                      errc fallback);

/// Encodes a published error (task_error, actor_died, ...) for the wire.
bytes encode_error(const std::exception_ptr& err);

/// The exception an encoded error stands for.
std::exception_ptr decode_error(const bytes& payload);

/// Publishes into the ref of `x` (a task or a call) the answer that came
/// back for it: its encoded value, or if not `ok` its encoded error; an
/// answer that does not decode fails the ref with why.
template <class Work>
void publish_answer(Work& x, bool ok, const bytes& out) {
  if (!ok) {
    x.result()->set_error(decode_error(out));
    return;
  }
  try {
    x.accept_result(out);
  } catch (...) {
    x.result()->set_error(std::current_exception());
  }
}

} // namespace lumen::detail
