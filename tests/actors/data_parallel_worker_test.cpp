#define BOOST_TEST_MODULE data_parallel_worker
#include <boost/test/unit_test.hpp>

// Data-parallel workers in one process: the gradient they send is their
// model's on their batch, compressed as asked; on their own they train a
// server in each mode (and a sharded one) to the true weights, a
// straggler among them (slowed as configured, late in backup steps); bad
// weights, models and shards are refused with the problem named.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <lumen/caf_interop.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

#include "ps_configs.hpp"

#include "runtime_fixture.hpp"

using namespace lumen::ml;
using lumen::test::sgd_config;

namespace {

constexpr auto deadline = std::chrono::seconds(60);

worker_config linear_worker(uint64_t batch, uint64_t seed = 0) {
  worker_config cfg;
  cfg.model = {"linear_regression", 4, {}, 1};
  cfg.batch_size = batch;
  cfg.seed = seed;
  return cfg;
}

std::vector<float> values(const compressed& g) {
  std::vector<float> out(g.numel);
  decompress(g, out.data(), out.size());
  return out;
}

/// Workers 0..n-1 over `problem`'s shards.
std::vector<data_parallel_worker>
spawn_workers(const linear_problem& problem, size_t n,
              std::vector<worker_config> cfgs) {
  std::vector<data_parallel_worker> out;
  for (size_t w = 0; w < n; ++w)
    out.push_back(spawn_worker(cfgs[w], shard_of(problem.data, w, n, 2),
                               lumen::this_node_id()));
  return out;
}

/// Every worker trains `ps` until version `until`; their reports.
std::vector<worker_report>
train_all(const std::vector<data_parallel_worker>& workers,
          const parameter_server& ps, uint64_t until) {
  std::vector<lumen::ObjectRef<worker_report>> runs;
  for (auto& w : workers)
    runs.push_back(lumen::call(w, train_atom::value, ps, until));
  return lumen::get(runs, deadline);
}

void require_true_weights(const parameter_server& ps,
                          const linear_problem& problem, float tolerance) {
  auto w = lumen::get(lumen::call(ps, get_weights_atom::value));
  for (size_t i = 0; i < 4; ++i)
    BOOST_TEST(std::abs(w.data<float>()[i] - problem.weights[i]) < tolerance,
               "weight " << i << ": " << w.data<float>()[i] << " vs "
                         << problem.weights[i]);
}

} // namespace

using lumen::test::local_runtime;
BOOST_TEST_GLOBAL_FIXTURE(local_runtime);

BOOST_AUTO_TEST_SUITE(data_parallel_worker_suite)

BOOST_AUTO_TEST_CASE(its_gradient_is_its_models_on_its_batch_compressed) {
  auto problem = make_linear_regression(300, 4, 5);
  linear_regression model{4};
  std::vector<float> weights{0.5f, -0.25f, 1.0f, 2.0f, 0.1f}, want(5);
  model.loss_and_gradient(weights.data(), problem.data, want.data());
  for (auto c : {codec::none, codec::fp16, codec::int8}) {
    auto cfg = linear_worker(0); // the whole shard, as the seed does
    cfg.compression = c;
    auto w = spawn_worker(cfg, problem.data, lumen::this_node_id());
    auto g = lumen::get(
      lumen::call(w, compute_gradient_atom::value, tensor::from(weights)),
      deadline);
    BOOST_TEST((g.kind == c));
    BOOST_TEST(g.bytes.size() == compressed_size(c, 5));
    auto got = values(g);
    // fp16 keeps 11 bits of each value; int8 is off by half a step of
    // its block's scale (max |x| / 127) at most.
    float top = 0;
    for (auto x : want)
      top = std::max(top, std::abs(x));
    for (size_t i = 0; i < 5; ++i) {
      auto bound = c == codec::none   ? 1e-5f
                   : c == codec::fp16 ? 1e-3f * std::abs(want[i]) + 1e-6f
                                      : top / 254 + 1e-6f;
      BOOST_TEST(std::abs(got[i] - want[i]) <= bound,
                 to_string(c)
                   << " value " << i << ": " << got[i] << " vs " << want[i]);
    }
    auto r = lumen::get(lumen::call(w, worker_stats_atom::value));
    BOOST_TEST(r.steps == 1u);
    BOOST_TEST(r.compute_seconds > 0.0);
  }
}

// The seed's loop with workers of ours: the driver hands out the weights,
// each worker answers with its gradient, the server applies them.
BOOST_AUTO_TEST_CASE(the_seeds_loop_with_workers_finds_the_true_weights) {
  auto problem = make_linear_regression(3000, 4, 5, 0.001f);
  auto workers =
    spawn_workers(problem, 3, std::vector<worker_config>(3, linear_worker(0)));
  auto ps =
    spawn_parameter_server(sgd_config(ps_mode::sync, 3, 0.3f),
                           linear_regression{4}.init(0), lumen::this_node_id());
  auto weights = lumen::get(lumen::call(ps, get_weights_atom::value));
  for (int step = 0; step < 300; ++step) {
    std::vector<lumen::ObjectRef<compressed>> grads;
    for (auto& w : workers)
      grads.push_back(lumen::call(w, compute_gradient_atom::value, weights));
    std::vector<lumen::ObjectRef<tensor>> applied;
    for (auto& g : lumen::get(grads, deadline))
      applied.push_back(lumen::call(ps, apply_gradients_atom::value, g));
    weights = lumen::get(applied, deadline)[0];
  }
  require_true_weights(ps, problem, 1e-3f);
}

BOOST_AUTO_TEST_CASE(on_their_own_they_train_a_sync_server_step_by_step) {
  auto problem = make_linear_regression(3000, 4, 5, 0.001f);
  auto cfg = linear_worker(100);
  cfg.compression = codec::int8; // with error feedback
  auto workers = spawn_workers(problem, 3, {cfg, cfg, cfg});
  auto ps =
    spawn_parameter_server(sgd_config(ps_mode::sync, 3, 0.2f),
                           linear_regression{4}.init(0), lumen::this_node_id());
  auto reports = train_all(workers, ps, 400);
  for (auto& r : reports) {
    BOOST_TEST(r.pushed == 400u); // every step had every worker
    BOOST_TEST(r.refused == 0u);
    BOOST_TEST(r.version == 400u);
    BOOST_TEST(r.epochs == 40u); // 1000 rows a shard, 100 a batch
    BOOST_TEST(r.bytes_sent == 400 * compressed_size(codec::int8, 5));
  }
  require_true_weights(ps, problem, 1e-2f);
  auto stats = lumen::get(lumen::call(ps, ps_stats_atom::value));
  BOOST_TEST(stats.applied == 1200u);
  BOOST_TEST(stats.step_seconds.size() == 400u);
}

BOOST_AUTO_TEST_CASE(a_straggler_is_left_behind_by_backup_steps) {
  auto problem = make_linear_regression(3000, 4, 5, 0.001f);
  auto slow = linear_worker(100);
  slow.slow.factor = 20;
  auto fast = linear_worker(100);
  auto workers = spawn_workers(problem, 3, {fast, fast, slow});
  auto cfg = sgd_config(ps_mode::sync, 3, 0.2f);
  cfg.backup = 1;
  auto ps = spawn_parameter_server(cfg, linear_regression{4}.init(0),
                                   lumen::this_node_id());
  auto reports = train_all(workers, ps, 300);
  BOOST_TEST(reports[2].slow_seconds > 0.0);
  // The fast two close most steps; the straggler's gradients come late.
  BOOST_TEST(reports[2].pushed < reports[0].pushed);
  BOOST_TEST(reports[2].refused > 0u);
  auto stats = lumen::get(lumen::call(ps, ps_stats_atom::value));
  BOOST_TEST(stats.version == 300u);
  BOOST_TEST(stats.refused[static_cast<size_t>(ps_refusal::late) - 1] ==
             reports[2].refused + reports[1].refused + reports[0].refused);
  require_true_weights(ps, problem, 1e-2f);
}

BOOST_AUTO_TEST_CASE(async_training_keeps_a_staleness_histogram) {
  auto problem = make_linear_regression(3000, 4, 5, 0.001f);
  auto slow = linear_worker(100, 1);
  slow.slow.chance = 0.5; // half its steps take 5 times as long
  slow.slow.chance_factor = 5;
  auto workers = spawn_workers(
    problem, 3, {linear_worker(100, 2), slow, linear_worker(100, 3)});
  auto cfg = sgd_config(ps_mode::async, 3, 0.1f);
  cfg.clip_norm = 10;
  auto ps = spawn_parameter_server(cfg, linear_regression{4}.init(0),
                                   lumen::this_node_id());
  auto reports = train_all(workers, ps, 900);
  auto stats = lumen::get(lumen::call(ps, ps_stats_atom::value));
  // Gradients under way when 900 was reached are applied too.
  BOOST_TEST(stats.version >= 900u);
  BOOST_TEST(stats.version < 903u);
  uint64_t pushed = 0, stale = 0;
  for (auto& r : reports)
    pushed += r.pushed;
  for (size_t s = 1; s < stats.staleness.size(); ++s)
    stale += stats.staleness[s];
  BOOST_TEST(stats.applied == pushed);
  BOOST_TEST(stale > 0u); // three workers: most gradients are a step old
  BOOST_TEST(reports[1].slow_seconds > 0.0);
  require_true_weights(ps, problem, 1e-2f);
}

BOOST_AUTO_TEST_CASE(they_train_a_sharded_server_range_by_range) {
  auto problem = make_linear_regression(3000, 4, 5, 0.001f);
  auto cfg = linear_worker(100);
  cfg.compression = codec::fp16;
  auto workers = spawn_workers(problem, 3, {cfg, cfg, cfg});
  auto here = lumen::this_node_id();
  // 5 parameters in 3 ranges: 2, 2 and 1.
  sharded_server ps{sgd_config(ps_mode::sync, 3, 0.2f),
                    linear_regression{4}.init(0),
                    {here, here, here}};
  std::vector<lumen::ObjectRef<worker_report>> runs;
  for (auto& w : workers)
    runs.push_back(
      lumen::call(w, train_atom::value, ps.servers(), uint64_t{400}));
  for (auto& r : lumen::get(runs, deadline)) {
    BOOST_TEST(r.pushed == 400u);
    BOOST_TEST(r.bytes_sent == 400 * (compressed_size(codec::fp16, 2) * 2 +
                                      compressed_size(codec::fp16, 1)));
  }
  for (auto& shard : ps.servers()) {
    auto stats = lumen::get(lumen::call(shard, ps_stats_atom::value));
    BOOST_TEST(stats.version == 400u);
    BOOST_TEST(stats.applied == 1200u);
  }
  auto [version, w] = ps.pull();
  BOOST_TEST(version == 400u);
  for (size_t i = 0; i < 4; ++i)
    BOOST_TEST(std::abs(w.data<float>()[i] - problem.weights[i]) < 1e-2f);
}

// Workers holding replicas that the server's int8 changes keep up to
// date: the same true weights, a quarter of the bytes back (and every
// 50th version in full); the server reports the drift.
BOOST_AUTO_TEST_CASE(a_compressed_broadcast_trains_on_a_quarter_of_the_bytes) {
  auto problem = make_linear_regression(3000, 200, 5, 0.001f);
  auto wcfg = linear_worker(100);
  wcfg.model.dim = 200;
  auto here = lumen::this_node_id();
  auto train = [&](codec broadcast, size_t shards) {
    auto workers = spawn_workers(problem, 3, {wcfg, wcfg, wcfg});
    auto cfg = sgd_config(ps_mode::sync, 3, 0.2f);
    cfg.broadcast = broadcast;
    cfg.rebroadcast_every = 50;
    sharded_server ps{cfg, linear_regression{200}.init(0),
                      std::vector<std::string>(shards, here)};
    std::vector<lumen::ObjectRef<worker_report>> runs;
    for (auto& w : workers)
      runs.push_back(
        lumen::call(w, train_atom::value, ps.servers(), uint64_t{400}));
    auto reports = lumen::get(runs, deadline);
    for (auto& r : reports) {
      BOOST_TEST(r.pushed == 400u);
      BOOST_TEST(r.refused == 0u);
    }
    auto [version, w] = ps.pull();
    BOOST_TEST(version == 400u);
    for (size_t i = 0; i < 200; ++i)
      BOOST_TEST(std::abs(w.data<float>()[i] - problem.weights[i]) < 1e-2f,
                 to_string(broadcast) << " weight " << i);
    auto stats = lumen::get(lumen::call(ps.servers()[0], ps_stats_atom::value));
    return std::make_pair(reports[0].bytes_received, stats);
  };
  auto [full_bytes, full_stats] = train(codec::none, 1);
  BOOST_TEST(full_stats.drift_max == 0.0f);
  for (size_t shards : {1, 2}) {
    auto [bytes, stats] = train(codec::int8, shards);
    BOOST_TEST(double(bytes) / double(full_bytes) < 0.30,
               shards << " shards: " << bytes << " bytes of " << full_bytes);
    BOOST_TEST(stats.drift_max > 0.0f);
    BOOST_TEST(stats.drift_max < 1e-2f);
    BOOST_TEST(stats.drift == 0.0f); // version 400: a multiple of 50
  }
}

BOOST_AUTO_TEST_CASE(bad_weights_models_and_shards_are_refused_naming_why) {
  auto problem = make_linear_regression(30, 4, 5);
  auto w = spawn_worker(linear_worker(10), problem.data, lumen::this_node_id());
  try {
    lumen::get(lumen::call(w, compute_gradient_atom::value,
                           tensor::from(std::vector<float>{1, 2})),
               deadline);
    BOOST_FAIL("weights of the wrong size were taken");
  } catch (const lumen::typed_actor_error& e) {
    BOOST_TEST(std::string{e.what()}.find("float32[2]") != std::string::npos,
               e.what());
  }
  // The worker goes on after a refusal.
  auto g = lumen::get(lumen::call(w, compute_gradient_atom::value,
                                  tensor::from(std::vector<float>(5, 0.0f))),
                      deadline);
  BOOST_TEST(g.numel == 5u);
  auto unknown = linear_worker(10);
  unknown.model.kind = "transformer";
  BOOST_CHECK_THROW(spawn_worker(unknown, problem.data, lumen::this_node_id()),
                    lumen::usage_error);
  auto wide = linear_worker(10);
  wide.model.dim = 7; // the shard has 4 features
  BOOST_CHECK_THROW(spawn_worker(wide, problem.data, lumen::this_node_id()),
                    lumen::usage_error);
  BOOST_CHECK_THROW(
    spawn_worker(linear_worker(10), dataset{}, lumen::this_node_id()),
    lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(a_worker_reads_its_shard_from_the_nodes_copy) {
  worker_config cfg;
  cfg.model = {"softmax_regression", 784, {}, 10};
  node_shard shard;
  shard.which = split::test;
  shard.worker = 1;
  shard.workers = 4;
  auto w = spawn_worker(cfg, shard, lumen::this_node_id());
  auto g = lumen::get(
    lumen::call(w, compute_gradient_atom::value, tensor({7850})), deadline);
  BOOST_TEST(g.numel == 7850u);
  // A node without the data set gives a worker that says so.
  shard.dir = "/nonexistent";
  auto lost = spawn_worker(cfg, shard, lumen::this_node_id());
  try {
    lumen::get(lumen::call(lost, worker_stats_atom::value), deadline);
    BOOST_FAIL("a worker without its data answered");
  } catch (const lumen::typed_actor_error& e) {
    BOOST_TEST(std::string{e.what()}.find("apt-get install") !=
                 std::string::npos,
               e.what());
  }
  shard.worker = 4;
  BOOST_CHECK_THROW(spawn_worker(cfg, shard, lumen::this_node_id()),
                    lumen::usage_error);
  auto wrong = cfg;
  wrong.model.dim = 100; // Fashion-MNIST has 784 features
  shard.worker = 0;
  BOOST_CHECK_THROW(spawn_worker(wrong, shard, lumen::this_node_id()),
                    lumen::usage_error);
}

BOOST_AUTO_TEST_SUITE_END()
