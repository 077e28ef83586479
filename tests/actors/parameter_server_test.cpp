#define BOOST_TEST_MODULE parameter_server
#include <boost/test/unit_test.hpp>

// The parameter server actor in one process: the sync barrier answering
// a step's workers alike, the seed's program fitting the synthetic
// regression, refusals as error codes that leave the weights alone,
// compressed gradients, steps that close without a worker that hangs or
// ended, checkpoints, sharded servers equal to one, and its counts.

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
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

constexpr auto deadline = std::chrono::seconds(30);

tensor grad(std::vector<float> values) {
  return tensor::from(values);
}

/// The refusal a call failed with, or none if it did not fail so.
template <class T>
std::optional<ps_refusal> refusal(const lumen::ObjectRef<T>& ref) {
  try {
    lumen::get(ref, deadline);
  } catch (const lumen::typed_actor_error& e) {
    BOOST_TEST_MESSAGE(e.what());
    return refusal_of(e);
  }
  return std::nullopt;
}

} // namespace

using lumen::test::local_runtime;
BOOST_TEST_GLOBAL_FIXTURE(local_runtime);

BOOST_AUTO_TEST_SUITE(parameter_server_suite)

BOOST_AUTO_TEST_CASE(a_sync_step_answers_all_its_workers_with_one_version) {
  auto ps = spawn_parameter_server(sgd_config(ps_mode::sync, 3), {1.0f, 1.0f},
                                   lumen::this_node_id());
  std::vector<lumen::ObjectRef<std::tuple<uint64_t, tensor>>> pushes;
  for (float g : {1.0f, 2.0f, 3.0f})
    pushes.push_back(
      lumen::call(ps, push_atom::value, uint64_t{0}, grad({g, 0})));
  auto answers = lumen::get(pushes, deadline);
  for (auto& [version, weights] : answers) {
    BOOST_TEST(version == 1u);
    BOOST_TEST(std::abs(weights.data<float>()[0] - 0.8f) < 1e-6f);
    BOOST_CHECK(weights == std::get<1>(answers[0]));
  }
  auto [version, weights] = lumen::get(lumen::call(ps, pull_atom::value));
  BOOST_TEST(version == 1u);
  BOOST_TEST(weights.data<float>()[1] == 1.0f);
}

BOOST_AUTO_TEST_CASE(answers_held_keep_their_numbers_while_the_server_steps) {
  // An answer shares the server's weights (no copy); the next step must
  // write a copy of its own while one is held.
  auto ps = spawn_parameter_server(sgd_config(ps_mode::sync, 1), {1.0f},
                                   lumen::this_node_id());
  auto held = lumen::get(lumen::call(ps, get_weights_atom::value));
  auto [v1, first] = lumen::get(
    lumen::call(ps, push_atom::value, uint64_t{0}, grad({1.0f})), deadline);
  auto [v2, second] =
    lumen::get(lumen::call(ps, push_atom::value, v1, grad({1.0f})), deadline);
  BOOST_TEST(v2 == 2u);
  BOOST_TEST(held.data<float>()[0] == 1.0f);
  BOOST_TEST(std::abs(first.data<float>()[0] - 0.9f) < 1e-6f);
  BOOST_TEST(std::abs(second.data<float>()[0] - 0.8f) < 1e-6f);
}

// The seed's driver loop: get the weights, every worker computes its
// gradient, the server applies them and answers with the new weights.
BOOST_AUTO_TEST_CASE(the_seeds_loop_fits_the_synthetic_regression) {
  auto problem = make_linear_regression(3000, 4, 5, 0.001f);
  linear_regression model{4};
  auto shards = lumen::test::shards_of(problem.data, 3, 2);
  auto ps = spawn_parameter_server(sgd_config(ps_mode::sync, 3, 0.3f),
                                   model.init(0), lumen::this_node_id());
  auto weights = lumen::get(lumen::call(ps, get_weights_atom::value));
  std::vector<float> g(model.num_params());
  for (int step = 0; step < 400; ++step) {
    std::vector<lumen::ObjectRef<tensor>> applied;
    for (auto& shard : shards) {
      model.loss_and_gradient(weights.data<float>(), shard, g.data());
      applied.push_back(
        lumen::call(ps, apply_gradients_atom::value, tensor::from(g)));
    }
    weights = lumen::get(applied, deadline)[0];
  }
  for (size_t i = 0; i < 4; ++i)
    BOOST_TEST(std::abs(weights.data<float>()[i] - problem.weights[i]) < 1e-3f);
  auto report = lumen::get(lumen::call(ps, ps_stats_atom::value));
  BOOST_TEST(report.version == 400u);
  BOOST_TEST(report.applied == 1200u);
}

// The seed's loop in async mode: `apply_gradients(grads)` says nothing of
// the weights the gradient was computed on, so the server counts it fresh;
// the same loop with `pull` and `push(version, grads)` has its staleness
// measured and its learning rate divided by it.
BOOST_AUTO_TEST_CASE(the_seeds_async_loop_measures_staleness_by_version) {
  auto problem = make_linear_regression(3000, 4, 5, 0.001f);
  linear_regression model{4};
  auto shards = lumen::test::shards_of(problem.data, 3, 2);
  std::vector<float> g(model.num_params());
  auto unversioned = spawn_parameter_server(
    sgd_config(ps_mode::async, 3, 0.1f), model.init(0), lumen::this_node_id());
  auto weights = lumen::get(lumen::call(unversioned, get_weights_atom::value));
  std::vector<lumen::ObjectRef<tensor>> applied;
  for (auto& shard : shards) {
    model.loss_and_gradient(weights.data<float>(), shard, g.data());
    applied.push_back(
      lumen::call(unversioned, apply_gradients_atom::value, tensor::from(g)));
  }
  lumen::get(applied, deadline);
  auto blind = lumen::get(lumen::call(unversioned, ps_stats_atom::value));
  BOOST_TEST(blind.staleness.size() == 1u); // all three counted fresh
  auto ps = spawn_parameter_server(sgd_config(ps_mode::async, 3, 0.3f),
                                   model.init(0), lumen::this_node_id());
  // [versioned_loop]
  auto [version, current] = lumen::get(lumen::call(ps, pull_atom::value));
  for (int step = 0; step < 400; ++step) {
    std::vector<lumen::ObjectRef<std::tuple<uint64_t, tensor>>> pushed;
    for (auto& shard : shards) {
      model.loss_and_gradient(current.data<float>(), shard, g.data());
      pushed.push_back(
        lumen::call(ps, push_atom::value, version, tensor::from(g)));
    }
    std::tie(version, current) = lumen::get(pushed, deadline)[0];
  }
  // [/versioned_loop]
  for (size_t i = 0; i < 4; ++i)
    BOOST_TEST(std::abs(current.data<float>()[i] - problem.weights[i]) < 1e-3f);
  auto report = lumen::get(lumen::call(ps, ps_stats_atom::value));
  // Each step's three gradients were computed on the weights of the first
  // answer of the step before: two versions behind and more.
  BOOST_TEST(report.staleness.size() > 3u);
  BOOST_TEST(report.staleness[0] == 1u); // only the very first gradient
  // Corrected: three gradients of 1 on version 0 step by 0.1, 0.1 (a
  // staleness of one counts as fresh) and 0.1 / 2.
  auto small = spawn_parameter_server(sgd_config(ps_mode::async, 3, 0.1f),
                                      {1.0f}, lumen::this_node_id());
  tensor last;
  for (int i = 0; i < 3; ++i)
    last = std::get<1>(lumen::get(
      lumen::call(small, push_atom::value, uint64_t{0}, grad({1.0f})),
      deadline));
  BOOST_TEST(std::abs(last.data<float>()[0] - 0.75f) < 1e-6f);
}

BOOST_AUTO_TEST_CASE(refusals_come_as_codes_and_leave_the_weights_alone) {
  auto ps = spawn_parameter_server(sgd_config(ps_mode::sync, 2), {1.0f, 2.0f},
                                   lumen::this_node_id());
  auto nan = std::numeric_limits<float>::quiet_NaN();
  BOOST_TEST((refusal(lumen::call(ps, push_atom::value, uint64_t{0},
                                  grad({1.0f}))) == ps_refusal::wrong_size));
  BOOST_TEST(
    (refusal(lumen::call(ps, push_atom::value, uint64_t{0},
                         grad({1.0f, nan}))) == ps_refusal::not_finite));
  BOOST_TEST((refusal(lumen::call(ps, push_atom::value, uint64_t{7},
                                  grad({1.0f, 1.0f}))) == ps_refusal::future));
  BOOST_TEST((refusal(lumen::call(ps, apply_gradients_atom::value,
                                  tensor({2}, dtype::float64))) ==
              ps_refusal::wrong_size));
  auto [version, weights] = lumen::get(lumen::call(ps, pull_atom::value));
  BOOST_TEST(version == 0u);
  BOOST_TEST((weights.to_vector<float>() == std::vector<float>{1.0f, 2.0f}));
  auto report = lumen::get(lumen::call(ps, ps_stats_atom::value));
  BOOST_TEST(report.refused[static_cast<size_t>(ps_refusal::not_finite) - 1] ==
             1u);
  BOOST_TEST(report.applied == 0u);
}

BOOST_AUTO_TEST_CASE(backup_and_async_refusals_name_late_and_stale) {
  auto cfg = sgd_config(ps_mode::sync, 3);
  cfg.backup = 1;
  auto ps = spawn_parameter_server(cfg, {0.0f}, lumen::this_node_id());
  auto a = lumen::call(ps, push_atom::value, uint64_t{0}, grad({1.0f}));
  auto b = lumen::call(ps, push_atom::value, uint64_t{0}, grad({1.0f}));
  lumen::get(a, deadline);
  lumen::get(b, deadline); // 2 of 3 closed the step
  BOOST_TEST((refusal(lumen::call(ps, push_atom::value, uint64_t{0},
                                  grad({1.0f}))) == ps_refusal::late));
  auto acfg = sgd_config(ps_mode::async, 2);
  acfg.max_staleness = 1;
  auto as = spawn_parameter_server(acfg, {0.0f}, lumen::this_node_id());
  for (int i = 0; i < 2; ++i)
    lumen::get(lumen::call(as, push_atom::value, uint64_t{0}, grad({1.0f})),
               deadline);
  BOOST_TEST((refusal(lumen::call(as, push_atom::value, uint64_t{0},
                                  grad({1.0f}))) == ps_refusal::too_stale));
  auto report = lumen::get(lumen::call(as, ps_stats_atom::value));
  BOOST_TEST((report.staleness == std::vector<uint64_t>{1, 1}));
}

BOOST_AUTO_TEST_CASE(compressed_gradients_are_taken_and_damaged_ones_refused) {
  auto ps = spawn_parameter_server(sgd_config(ps_mode::sync, 1, 1.0f),
                                   {0.0f, 0.0f}, lumen::this_node_id());
  std::vector<float> g{0.5f, -2.0f};
  auto [version, weights] =
    lumen::get(lumen::call(ps, push_atom::value, uint64_t{0},
                           compress(g.data(), g.size(), codec::fp16)),
               deadline);
  BOOST_TEST(version == 1u);
  BOOST_TEST((weights.to_vector<float>() == std::vector<float>{-0.5f, 2.0f}));
  auto damaged = compress(g.data(), g.size(), codec::int8);
  damaged.bytes.pop_back();
  BOOST_TEST((refusal(lumen::call(ps, apply_gradients_atom::value, damaged)) ==
              ps_refusal::wrong_size));
  auto three = std::vector<float>{1, 2, 3};
  BOOST_TEST((refusal(lumen::call(ps, apply_gradients_atom::value,
                                  compress(three.data(), 3, codec::none))) ==
              ps_refusal::wrong_size));
  auto report = lumen::get(lumen::call(ps, ps_stats_atom::value));
  BOOST_TEST(report.refused[static_cast<size_t>(ps_refusal::wrong_size) - 1] ==
             2u);
  BOOST_TEST(report.version == 1u);
}

BOOST_AUTO_TEST_CASE(a_step_that_waits_too_long_closes_with_what_it_has) {
  auto cfg = sgd_config(ps_mode::sync, 3, 1.0f);
  cfg.step_timeout_ms = 200;
  auto ps = spawn_parameter_server(cfg, {0.0f}, lumen::this_node_id());
  auto start = std::chrono::steady_clock::now();
  auto a = lumen::call(ps, push_atom::value, uint64_t{0}, grad({1.0f}));
  auto b = lumen::call(ps, push_atom::value, uint64_t{0}, grad({3.0f}));
  auto [va, wa] = lumen::get(a, deadline);
  auto [vb, wb] = lumen::get(b, deadline);
  BOOST_CHECK(std::chrono::steady_clock::now() - start >=
              std::chrono::milliseconds(200));
  BOOST_TEST(va == 1u);
  BOOST_TEST(vb == 1u);
  BOOST_TEST(wa.data<float>()[0] == -2.0f); // the mean of the two
  auto report = lumen::get(lumen::call(ps, ps_stats_atom::value));
  BOOST_TEST(report.timed_out == 1u);
}

// A pusher that ends (here a CAF actor that pushes once and quits; in
// ml_procs, a worker process killed) is not waited for again.
BOOST_AUTO_TEST_CASE(a_step_closes_without_a_pusher_that_ended) {
  auto cfg = sgd_config(ps_mode::sync, 3, 1.0f);
  auto ps = spawn_parameter_server(cfg, {0.0f}, lumen::this_node_id());
  lumen::system().spawn([ps](caf::event_based_actor* self) {
    self->send(ps, push_atom::value, uint64_t{0}, grad({4.0f}));
    self->quit();
  });
  auto [version, weights] = lumen::get(
    lumen::call(ps, push_atom::value, uint64_t{0}, grad({2.0f})), deadline);
  BOOST_TEST(version == 1u);
  BOOST_TEST(weights.data<float>()[0] == -3.0f);
  auto report = lumen::get(lumen::call(ps, ps_stats_atom::value));
  BOOST_TEST(report.workers_lost == 1u);
  BOOST_TEST(report.timed_out == 0u);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_restores_into_another_server) {
  auto cfg = sgd_config(ps_mode::sync, 1, 0.1f);
  cfg.optimizer.kind = optimizer_kind::momentum;
  auto a = spawn_parameter_server(cfg, {1.0f, 2.0f}, lumen::this_node_id());
  for (int i = 0; i < 3; ++i)
    lumen::get(lumen::call(a, apply_gradients_atom::value, grad({1.0f, -1.0f})),
               deadline);
  auto path =
    "/tmp/lumen-ps-test-" + std::to_string(::getpid()) + ".safetensors";
  BOOST_TEST(
    lumen::get(lumen::call(a, checkpoint_atom::value, path), deadline) == 3u);
  auto b = spawn_parameter_server(cfg, {0.0f, 0.0f}, lumen::this_node_id());
  BOOST_TEST(lumen::get(lumen::call(b, restore_atom::value, path), deadline) ==
             3u);
  auto next = [&](const parameter_server& ps) {
    return lumen::get(
      lumen::call(ps, push_atom::value, uint64_t{3}, grad({1.0f, -1.0f})),
      deadline);
  };
  BOOST_CHECK(next(a) == next(b)); // the velocity came back too
  try {
    lumen::get(lumen::call(b, restore_atom::value, std::string{"/nonexistent"}),
               deadline);
    BOOST_ERROR("a missing checkpoint was restored");
  } catch (const lumen::typed_actor_error& e) {
    BOOST_TEST(std::string{e.what()}.find("cannot be opened") !=
                 std::string::npos,
               e.what());
  }
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(a_sharded_server_answers_as_one_server_would) {
  for (auto mode : {ps_mode::sync, ps_mode::async}) {
    auto cfg = sgd_config(mode, 1, 0.1f);
    cfg.optimizer.kind = optimizer_kind::momentum;
    std::vector<float> start(11);
    for (size_t i = 0; i < start.size(); ++i)
      start[i] = 0.1f * static_cast<float>(i);
    auto here = lumen::this_node_id();
    auto one = spawn_parameter_server(cfg, start, here);
    sharded_server three{cfg, start, {here, here, here}};
    BOOST_TEST(three.servers().size() == 3u);
    for (uint64_t v = 0; v < 5; ++v) {
      tensor g({11});
      for (size_t i = 0; i < 11; ++i)
        g.data<float>()[i] = std::sin(static_cast<float>(v * 11 + i));
      auto [v1, w1] =
        lumen::get(lumen::call(one, push_atom::value, v, g), deadline);
      auto [v3, w3] = three.push(v, g);
      BOOST_TEST(v1 == v3);
      BOOST_CHECK(w1 == w3); // the same floats, element by element
    }
    BOOST_CHECK(std::get<1>(three.pull()) ==
                lumen::get(lumen::call(one, get_weights_atom::value)));
    // A refusal comes back with its code, as from one server.
    try {
      three.push(9, tensor({11}));
      BOOST_ERROR("a gradient from the future was taken");
    } catch (const lumen::typed_actor_error& e) {
      BOOST_TEST((refusal_of(e) == ps_refusal::future));
    }
  }
  auto clipped = sgd_config(ps_mode::async, 1);
  clipped.clip_norm = 1;
  auto here = lumen::this_node_id();
  BOOST_CHECK_THROW((sharded_server{clipped, {0.0f, 0.0f}, {here, here}}),
                    lumen::usage_error);
  BOOST_CHECK_THROW(
    (sharded_server{sgd_config(ps_mode::sync, 1), {0.0f}, {here, here}}),
    lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(a_config_that_cannot_work_is_refused_at_spawn) {
  auto cfg = sgd_config(ps_mode::sync, 2);
  cfg.backup = 2;
  BOOST_CHECK_THROW(spawn_parameter_server(cfg, {0.0f}, lumen::this_node_id()),
                    lumen::usage_error);
}

BOOST_AUTO_TEST_SUITE_END()
