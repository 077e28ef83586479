#pragma once

// The parameter server as a typed CAF actor, spawnable by name on any
// node, around ps_core's rules. The seed's operations keep their names:
//
//   auto ps = lumen::ml::spawn_parameter_server(cfg, model.init(0), node);
//   auto w = lumen::get(lumen::call(ps, get_weights_atom::value));
//   w = lumen::get(lumen::call(ps, apply_gradients_atom::value, grads));
//
// and beside them the versioned pair: push(version, grads) -> (version,
// weights), pull() -> (version, weights); a worker's push_update(version,
// grads) is answered with a weights_update: the weights, or in sync mode
// with a compressed broadcast the change since the replica the workers
// hold (broadcast.hpp). A gradient comes as a float32
// tensor or compressed (fp16, int8: what a worker sends). In sync mode a push
// is answered when its step closes, every worker of the step with the same
// weights and version (a barrier on response promises); in async mode at once.
// A refused gradient is an error reply whose code says why (refusal_of):
// callers tell "too stale" from "wrong size" without reading messages.
// checkpoint(path) writes the weights, version and optimizer state as a
// safetensors file on the server's node and answers with the version;
// restore(path) reads one back (save_checkpoint, restore_checkpoint).
//
// Any program that includes this header (or <lumen/ml.hpp>) can host
// parameter servers.

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <lumen/caf_interop.hpp>

#include "lumen/ml/broadcast.hpp"
#include "lumen/ml/compress.hpp"
#include "lumen/ml/ps_core.hpp"
#include "lumen/ml/tensor.hpp"
#include "lumen/ml/wire.hpp"

namespace lumen::ml {

using get_weights_atom = caf::atom_constant<caf::atom("lmgetw")>;
using apply_gradients_atom = caf::atom_constant<caf::atom("lmapplyg")>;
using push_atom = caf::atom_constant<caf::atom("lmpush")>;
using push_update_atom = caf::atom_constant<caf::atom("lmpushu")>;
using pull_atom = caf::atom_constant<caf::atom("lmpull")>;
using ps_stats_atom = caf::atom_constant<caf::atom("lmpsstat")>;
using checkpoint_atom = caf::atom_constant<caf::atom("lmckpt")>;
using restore_atom = caf::atom_constant<caf::atom("lmrestore")>;
using start_from_atom = caf::atom_constant<caf::atom("lmstartw")>;

/// A server's counts, as its stats message answers them.
struct ps_report {
  uint64_t version = 0;
  uint64_t applied = 0;
  uint64_t steps = 0;
  // Refusals by ps_refusal in its order: wrong_size, not_finite, future,
  // too_stale, late (refused[i] counts ps_refusal(i + 1)).
  std::vector<uint64_t> refused;
  std::vector<uint64_t> staleness; // async: gradients by staleness 0, 1, ...
  uint64_t timed_out = 0;          // sync: steps closed by a time limit
  uint64_t workers_lost = 0;       // sync: pushers ended or given up on
  std::vector<float> step_seconds; // the last 4096 steps' durations, in order
  float drift = 0;     // compressed broadcast: the last step's (broadcaster)
  float drift_max = 0; // and the largest
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ps_report& x) {
  return f(x.version, x.applied, x.steps, x.refused, x.staleness, x.timed_out,
           x.workers_lost, x.step_seconds, x.drift, x.drift_max);
}

using parameter_server = caf::typed_actor<
  caf::replies_to<get_weights_atom>::with<tensor>,
  caf::replies_to<apply_gradients_atom, tensor>::with<tensor>,
  caf::replies_to<apply_gradients_atom, compressed>::with<tensor>,
  caf::replies_to<push_atom, uint64_t, tensor>::with<uint64_t, tensor>,
  caf::replies_to<push_atom, uint64_t, compressed>::with<uint64_t, tensor>,
  caf::replies_to<push_update_atom, uint64_t, compressed>::with<weights_update>,
  caf::replies_to<pull_atom>::with<uint64_t, tensor>,
  caf::replies_to<ps_stats_atom>::with<ps_report>,
  caf::replies_to<checkpoint_atom, std::string>::with<uint64_t>,
  caf::replies_to<restore_atom, std::string>::with<uint64_t>,
  // The weights to start from, before any gradient: how
  // spawn_parameter_server gives a large model's on the data plane.
  caf::replies_to<start_from_atom, tensor>::with<uint64_t>>;

/// The name parameter servers are registered under.
constexpr const char* parameter_server_name = "lumen.parameter_server";

/// Spawns a server with `cfg`, starting from `initial` weights, on node
/// `node_id` (this process for lumen::this_node_id()); weights past a few
/// megabytes go on the data plane after the spawn, not in it (a spawn is a
/// CAF request, which 400 MB would hold past its time limit). Throws
/// `usage_error` if the config cannot work or the node cannot host one.
parameter_server spawn_parameter_server(const ps_config& cfg,
                                        const std::vector<float>& initial,
                                        const std::string& node_id);

/// The error category of a server's refusals.
constexpr caf::atom_value ps_error_category = caf::atom("lumenps");

/// Why the server refused a gradient, if `e` is such a refusal.
std::optional<ps_refusal> refusal_of(const typed_actor_error& e);

namespace detail {

/// Pulls the server's registrations into every program that includes
/// this header, though the library is static.
bool parameter_server_registered();
inline const bool parameter_server_linked = parameter_server_registered();

} // namespace detail

} // namespace lumen::ml
