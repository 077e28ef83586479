#pragma once

// The seed's DataParallelWorker as a typed CAF actor, spawnable by name on
// any node: its shard of the data, a model replica, gradients computed
// with Eigen on a thread of its own (the scheduler's threads stay free
// for messages), the next batch prepared while this one computes, the
// gradient compressed for the wire. Driven step by step, as in the seed:
//
//   auto w = lumen::ml::spawn_worker(cfg, shard, node);
//   auto g = lumen::get(lumen::call(w, compute_gradient_atom::value, weights));
//   weights = lumen::get(lumen::call(ps, apply_gradients_atom::value, g));
//
// or on its own against a server, pulling and pushing until the server's
// version reaches `until` (a refused gradient, late or too stale, is
// counted, and the worker pulls afresh and goes on):
//
//   auto report = lumen::get(lumen::call(w, train_atom::value, ps, until));
//
// A sharded server's servers() train alike: the worker pushes each its
// range, all at once, and joins their weights.
//
// Any program that includes this header (or <lumen/ml.hpp>) can host
// workers.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "lumen/ml/compress.hpp"
#include "lumen/ml/data.hpp"
#include "lumen/ml/models.hpp"
#include "lumen/ml/parameter_server.hpp"
#include "lumen/ml/sharded_server.hpp"
#include "lumen/ml/tensor.hpp"
#include "lumen/ml/wire.hpp"

namespace lumen::ml {

using compute_gradient_atom = caf::atom_constant<caf::atom("lmcompg")>;
using train_atom = caf::atom_constant<caf::atom("lmtrain")>;
using worker_stats_atom = caf::atom_constant<caf::atom("lmwstat")>;

/// Makes a worker a straggler: each step takes `factor` times its compute
/// time, and with probability `chance` a step takes `chance_factor` times
/// (the worker sleeps the difference on its own thread).
struct slowdown {
  double factor = 1;
  double chance = 0;
  double chance_factor = 10;
};

struct worker_config {
  model_spec model;
  uint64_t batch_size = 64; // 0: the whole shard each step, as the seed does
  codec compression = codec::none;
  // fp16, int8: carry each step's quantization error into the next.
  bool error_feedback = true;
  bool prefetch = true; // prepare the next batch while this one computes
  uint64_t seed = 0;    // batch order and slowdown draws
  slowdown slow;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, slowdown& x) {
  return f(caf::meta::type_name("lumen::ml::slowdown"), x.factor, x.chance,
           x.chance_factor);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_config& x) {
  return f(caf::meta::type_name("lumen::ml::worker_config"), x.model,
           x.batch_size, x.compression, x.error_feedback, x.prefetch, x.seed,
           x.slow);
}

/// What a worker did, as its stats (and the end of a train) report it.
struct worker_report {
  uint64_t steps = 0;           // gradients computed
  uint64_t pushed = 0;          // train: gradients the server took
  uint64_t refused = 0;         // train: late or too stale, pulled afresh
  uint64_t epochs = 0;          // passes over the shard begun
  uint64_t version = 0;         // train: the server's version last seen
  uint64_t bytes_sent = 0;      // gradient bytes, compressed
  uint64_t bytes_received = 0;  // train: weight bytes, pulled or pushed back
  double compute_seconds = 0;   // gradients and compression
  double data_wait_seconds = 0; // waiting for batches
  double slow_seconds = 0;      // sleeping as a straggler
  float loss = 0;               // the last batch's, before its step
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_report& x) {
  return f(caf::meta::type_name("lumen::ml::worker_report"), x.steps, x.pushed,
           x.refused, x.epochs, x.version, x.bytes_sent, x.bytes_received,
           x.compute_seconds, x.data_wait_seconds, x.slow_seconds, x.loss);
}

using data_parallel_worker = caf::typed_actor<
  caf::replies_to<compute_gradient_atom, tensor>::with<compressed>,
  caf::replies_to<train_atom, parameter_server, uint64_t>::with<worker_report>,
  caf::replies_to<train_atom, std::vector<parameter_server>,
                  uint64_t>::with<worker_report>,
  caf::replies_to<worker_stats_atom>::with<worker_report>>;

/// The name workers are registered under.
constexpr const char* data_parallel_worker_name = "lumen.data_parallel_worker";

/// A worker's shard of Fashion-MNIST that it reads on its own node, from
/// the one copy every process there maps (node_fashion_mnist), rather
/// than receiving it: its share (share_of) of the split, standardized.
struct node_shard {
  split which = split::train;
  float mean = 0.2860f; // standardization; 0 and 1 keep the pixels in [0, 1]
  float stddev = 0.3530f;
  uint64_t worker = 0;
  uint64_t workers = 1;
  bool shared = true; // false: the process loads a copy of its own
  std::string dir = fashion_mnist_dir;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_shard& x) {
  return f(caf::meta::type_name("lumen::ml::node_shard"), x.which, x.mean,
           x.stddev, x.worker, x.workers, x.shared, x.dir);
}

/// Spawns a worker with `cfg` over `shard` (its rows; the worker keeps
/// them) on node `node_id` (this process for lumen::this_node_id()).
/// Throws `usage_error` if the model cannot be built, the shard is empty
/// or does not fit the model, or the node cannot host a worker.
data_parallel_worker spawn_worker(const worker_config& cfg,
                                  const dataset& shard,
                                  const std::string& node_id);

/// Spawns a worker that reads its shard on node `node_id`. A node that
/// cannot read it (no data set there) gives a worker that answers every
/// request with the reason. Throws `usage_error` if the model does not
/// take Fashion-MNIST's 784 features, or the node cannot host a worker.
data_parallel_worker spawn_worker(const worker_config& cfg,
                                  const node_shard& shard,
                                  const std::string& node_id);

namespace detail {

/// Pulls the worker's registrations into every program that includes
/// this header, though the library is static.
bool data_parallel_worker_registered();
inline const bool data_parallel_worker_linked =
  data_parallel_worker_registered();

} // namespace detail

} // namespace lumen::ml
