#define BOOST_TEST_MODULE sim_ml
#include <boost/test/unit_test.hpp>

// The ML layer's typed actors on a simulated cluster: a sync parameter
// server with a straggler node and one backup worker drops exactly the
// straggler's gradients, the same way under every seed; ring peers
// all-reduce across simulated nodes; a worker's node that dies is one the
// server goes on without.

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <lumen/caf_interop.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>
#include <lumen/sim.hpp>

#include "closed_forms.hpp"
#include "ps_configs.hpp"

using namespace lumen::ml;
using namespace std::chrono_literals;
using lumen::test::sgd_config;

namespace {

/// A run of `nodes` nodes whose last one is a straggler (factor 3).
struct simulated {
  explicit simulated(uint64_t seed, int nodes = 4) {
    lumen::init_options opts;
    opts.sim.enabled = true;
    opts.sim.seed = seed;
    opts.sim.nodes = nodes;
    opts.sim.slow = {{"node-" + std::to_string(nodes - 1), 3.0}};
    lumen::init(opts);
  }
  ~simulated() {
    lumen::shutdown();
  }
};

worker_config linear_worker() {
  worker_config cfg;
  cfg.model = {"linear_regression", 4, {}, 1};
  cfg.batch_size = 100;
  return cfg;
}

/// Workers on node-1 to node-3, a third of `problem`'s rows each.
std::vector<data_parallel_worker> three_workers(const linear_problem& problem) {
  std::vector<data_parallel_worker> out;
  for (size_t w = 0; w < 3; ++w)
    out.push_back(spawn_worker(linear_worker(), shard_of(problem.data, w, 3, 2),
                               "node-" + std::to_string(w + 1)));
  return out;
}

/// What a sync train of three workers on node-1 to node-3 (the straggler)
/// against a server on node-0 with one backup worker ended with.
struct sync_train {
  std::vector<worker_report> reports;
  ps_report stats;
  std::vector<float> weights;
  std::vector<float> truth;
  int64_t virtual_ns = 0;
};

sync_train train_with_a_straggler(uint64_t seed) {
  simulated run{seed};
  auto problem = make_linear_regression(3000, 4, 5, 0.001f);
  auto workers = three_workers(problem);
  auto cfg = sgd_config(ps_mode::sync, 3, 0.2f);
  cfg.backup = 1;
  auto ps = spawn_parameter_server(cfg, linear_regression{4}.init(0), "node-0");
  auto start = lumen::sim::now();
  std::vector<lumen::ObjectRef<worker_report>> runs;
  for (auto& w : workers)
    runs.push_back(lumen::call(w, train_atom::value, ps, uint64_t{300}));
  sync_train out;
  out.reports = lumen::get(runs);
  out.virtual_ns = (lumen::sim::now() - start).count();
  out.stats = lumen::get(lumen::call(ps, ps_stats_atom::value));
  auto w = lumen::get(lumen::call(ps, get_weights_atom::value));
  out.weights.assign(w.data<float>(), w.data<float>() + w.numel());
  out.truth = problem.weights;
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_backup_worker_drops_exactly_the_stragglers_gradients) {
  for (uint64_t seed : {1, 2, 3}) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      auto t = train_with_a_straggler(seed);
      auto& fast1 = t.reports[0];
      auto& fast2 = t.reports[1];
      auto& slow = t.reports[2];
      // Two of three close each step: always the two fast ones, so every
      // step of theirs counts and every gradient of the straggler's comes
      // after its step closed.
      BOOST_TEST(fast1.pushed == 300u);
      BOOST_TEST(fast2.pushed == 300u);
      BOOST_TEST(fast1.refused == 0u);
      BOOST_TEST(fast2.refused == 0u);
      BOOST_TEST(slow.pushed == 0u);
      BOOST_TEST(slow.refused > 0u);
      BOOST_TEST(slow.refused == slow.steps);
      BOOST_TEST(t.stats.version == 300u);
      BOOST_TEST(t.stats.applied == 600u);
      BOOST_TEST(t.stats.refused[static_cast<size_t>(ps_refusal::late) - 1] ==
                 slow.refused);
      for (size_t i = 0; i < 4; ++i)
        BOOST_TEST(std::abs(t.weights[i] - t.truth[i]) < 1e-2f);
      // The straggler's compute was charged three times a fast one's.
      BOOST_TEST(slow.compute_seconds / static_cast<double>(slow.steps) ==
                   3 * fast1.compute_seconds / static_cast<double>(fast1.steps),
                 boost::test_tools::tolerance(1e-6));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_same_seed_trains_the_same_way) {
  auto a = train_with_a_straggler(7);
  auto b = train_with_a_straggler(7);
  BOOST_TEST(a.virtual_ns == b.virtual_ns);
  BOOST_TEST(a.weights == b.weights, boost::test_tools::per_element());
  BOOST_TEST(a.reports[2].steps == b.reports[2].steps);
}

BOOST_AUTO_TEST_CASE(a_sync_server_goes_on_without_a_worker_whose_node_died) {
  simulated run{1};
  auto problem = make_linear_regression(3000, 4, 5, 0.001f);
  auto workers = three_workers(problem);
  auto ps = spawn_parameter_server(sgd_config(ps_mode::sync, 3, 0.2f),
                                   linear_regression{4}.init(0), "node-0");
  std::vector<lumen::ObjectRef<worker_report>> runs;
  for (auto& w : workers)
    runs.push_back(lumen::call(w, train_atom::value, ps, uint64_t{300}));
  lumen::sim::kill_node("node-2", lumen::sim::now() + 5ms);
  BOOST_TEST(lumen::get(runs[0]).version == 300u);
  BOOST_TEST(lumen::get(runs[2]).version == 300u);
  BOOST_CHECK_THROW(lumen::get(runs[1]), lumen::actor_died);
  auto stats = lumen::get(lumen::call(ps, ps_stats_atom::value));
  BOOST_TEST(stats.version == 300u);
  BOOST_TEST(stats.workers_lost == 1u);
}

BOOST_AUTO_TEST_CASE(ring_peers_allreduce_across_simulated_nodes) {
  simulated run{1, 4};
  std::vector<lumen::collective::ring_peer> peers;
  for (int r = 0; r < 3; ++r)
    peers.push_back(
      lumen::collective::spawn_ring_peer("node-" + std::to_string(r + 1)));
  lumen::collective::create_group(peers, "sim_peers");
  std::vector<lumen::ObjectRef<tensor>> sums;
  for (int r = 0; r < 3; ++r)
    sums.push_back(lumen::call(
      peers[static_cast<size_t>(r)], lumen::collective::allreduce_atom::value,
      std::string{"sim_peers"}, lumen::test::rank_input(r, 1000),
      lumen::collective::reduce_op::sum));
  for (auto& s : lumen::get(sums))
    BOOST_TEST(lumen::test::matches(s, lumen::collective::reduce_op::sum, 3));
  lumen::collective::destroy_group(peers, "sim_peers");
}
