// The worker that reads its shard on its own node, from the node's one
// copy of the data set, instead of receiving it.

#include <exception>
#include <string>
#include <utility>

#include <caf/result.hpp>
#include <caf/sec.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/cluster.hpp>

#include "lumen/ml/data_parallel_worker.hpp"

#include "workers/worker_actor.hpp"

namespace lumen::ml {

namespace {

/// A worker that could not read its shard: every request gets the reason.
data_parallel_worker::behavior_type broken_worker(std::string why) {
  auto fail = [why] { return caf::make_error(caf::sec::runtime_error, why); };
  return {
    [=](compute_gradient_atom, tensor&) -> caf::result<compressed> {
      return fail();
    },
    [=](train_atom, parameter_server&, uint64_t) -> caf::result<worker_report> {
      return fail();
    },
    [=](train_atom, std::vector<parameter_server>&,
        uint64_t) -> caf::result<worker_report> { return fail(); },
    [=](worker_stats_atom) -> caf::result<worker_report> { return fail(); },
  };
}

} // namespace

namespace detail {

data_parallel_worker::behavior_type
node_worker(worker_pointer self, worker_config cfg, node_shard where) {
  try {
    auto all = where.shared ? node_fashion_mnist(where.which, where.mean,
                                                 where.stddev, where.dir)
                            : load_fashion_mnist(where.which, where.dir);
    if (!where.shared)
      standardize(all, where.mean, where.stddev);
    // Qualified: lookup by argument would need the state's complete type.
    return detail::worker(self, std::move(cfg),
                          share_of(all, where.worker, where.workers));
  } catch (const std::exception& e) {
    return broken_worker("the worker could not read its shard on node " +
                         lumen::this_node_id() + ": " + e.what());
  }
}

} // namespace detail

LUMEN_MESSAGE_TYPE(node_shard, "lumen::ml::node_shard");

data_parallel_worker spawn_worker(const worker_config& cfg,
                                  const node_shard& shard,
                                  const std::string& node_id) {
  auto net = make_model(cfg.model);
  dataset probe{tensor({1, 784}), tensor({1}, dtype::int32)};
  net->loss(net->init(0).data(), probe);
  if (shard.worker >= shard.workers)
    throw usage_error("spawn_worker: worker " + std::to_string(shard.worker) +
                      " of " + std::to_string(shard.workers) +
                      "; workers are numbered from 0");
  return lumen::spawn_on<data_parallel_worker>(
    node_id, detail::node_shard_worker_name, cfg, shard);
}

} // namespace lumen::ml
