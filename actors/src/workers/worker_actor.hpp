#pragma once

// The worker's typed-actor functions, for the two files that make it: the
// worker over rows it is given (data_parallel_worker.cpp, which registers
// both) and the worker that reads its node's shard (node_shard_worker.cpp).

#include "lumen/ml/data_parallel_worker.hpp"

namespace lumen::ml::detail {

struct worker_state; // worker_state.hpp

using worker_pointer = data_parallel_worker::stateful_pointer<worker_state>;

/// The name the node-shard worker is registered under.
constexpr const char* node_shard_worker_name =
  "lumen.data_parallel_worker.node_shard";

/// A worker over `shard`.
data_parallel_worker::behavior_type worker(worker_pointer self,
                                           worker_config cfg, dataset shard);

/// A worker over its share of its node's copy of the data set; one that
/// answers every request with the reason if it cannot read it.
data_parallel_worker::behavior_type
node_worker(worker_pointer self, worker_config cfg, node_shard where);

} // namespace lumen::ml::detail
