#define BOOST_TEST_MODULE ps_core
#include <boost/test/unit_test.hpp>

// A parameter server's rules, deterministically, without actors: the sync
// step and its barrier count, backup steps dropping late gradients, async
// staleness (scale, limit, histogram), clipping, refused input that
// changes nothing, and servers that fit the synthetic regression.

#include <cmath>
#include <limits>
#include <vector>

#include <lumen/errors.hpp>
#include <lumen/ml.hpp>

#include "ps_configs.hpp"

using namespace lumen::ml;
using lumen::test::sgd_config;

BOOST_AUTO_TEST_SUITE(ps_core_suite)

BOOST_AUTO_TEST_CASE(a_sync_step_closes_with_its_last_gradient_on_the_mean) {
  ps_core ps{sgd_config(ps_mode::sync, 3), {1.0f, 1.0f}};
  std::vector<float> a{1, 0}, b{2, 0}, c{3, 3};
  BOOST_TEST(!ps.push(0, a.data(), 2).closed_step);
  BOOST_TEST(!ps.push(0, b.data(), 2).closed_step);
  BOOST_TEST(ps.weights()[0] == 1.0f); // nothing applied before the barrier
  BOOST_TEST(ps.pending() == 2u);
  auto out = ps.push(0, c.data(), 2);
  BOOST_TEST(out.closed_step);
  BOOST_TEST(ps.version() == 1u);
  BOOST_TEST(std::abs(ps.weights()[0] - (1.0f - 0.1f * 2.0f)) < 1e-6f);
  BOOST_TEST(std::abs(ps.weights()[1] - (1.0f - 0.1f * 1.0f)) < 1e-6f);
  BOOST_TEST(ps.stats().applied == 3u);
  BOOST_TEST(ps.stats().steps == 1u);
}

BOOST_AUTO_TEST_CASE(shared_weights_stay_as_they_were_while_held) {
  ps_core ps{sgd_config(ps_mode::sync, 1), {1.0f, 1.0f}};
  std::vector<float> g{1, 2};
  auto held = ps.shared_weights();
  ps.push(0, g.data(), 2); // updates a copy: `held` is someone's answer
  BOOST_TEST((*held == std::vector<float>{1.0f, 1.0f}));
  BOOST_TEST(std::abs(ps.weights()[1] - (1.0f - 0.1f * 2.0f)) < 1e-6f);
  BOOST_TEST(held->data() != ps.weights().data());
  held.reset();
  // Held by no one, they are updated where they are.
  auto at = ps.weights().data();
  ps.push(1, g.data(), 2);
  BOOST_TEST(ps.weights().data() == at);
  BOOST_TEST(std::abs(ps.weights()[1] - (1.0f - 0.1f * 4.0f)) < 1e-6f);
}

BOOST_AUTO_TEST_CASE(a_backup_step_closes_early_and_drops_the_late_gradient) {
  auto cfg = sgd_config(ps_mode::sync, 4);
  cfg.backup = 1;
  ps_core ps{cfg, {0.0f}};
  std::vector<float> g{3.0f};
  ps.push(0, g.data(), 1);
  ps.push(0, g.data(), 1);
  BOOST_TEST(ps.push(0, g.data(), 1).closed_step); // 3 of 4 close it
  auto w = ps.weights();
  auto late = ps.push(0, g.data(), 1);
  BOOST_TEST((late.refused == ps_refusal::late));
  BOOST_TEST(ps.weights() == w);
  BOOST_TEST(ps.stats().refused.at(ps_refusal::late) == 1u);
  BOOST_TEST(ps.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(a_step_closes_without_workers_that_are_gone) {
  ps_core ps{sgd_config(ps_mode::sync, 3), {0.0f}};
  std::vector<float> g{2.0f};
  BOOST_TEST(ps.quorum() == 3u);
  ps.push(0, g.data(), 1);
  BOOST_TEST(!ps.lose_workers(1)); // 1 of 2 in
  BOOST_TEST(ps.quorum() == 2u);
  BOOST_TEST(ps.push(0, g.data(), 1).closed_step);
  BOOST_TEST(ps.version() == 1u);
  ps.push(1, g.data(), 1);
  BOOST_TEST(ps.lose_workers(1)); // the one in is all there is now
  BOOST_TEST(ps.version() == 2u);
  BOOST_TEST(ps.lose_workers(5) == false); // none pending; a quorum of 1
  BOOST_TEST(ps.quorum() == 1u);
  BOOST_TEST(ps.stats().workers_lost == 7u);
  // Workers given up on that push again are waited for again.
  ps_core back{sgd_config(ps_mode::sync, 3), {0.0f}};
  back.lose_workers(1);
  BOOST_TEST(back.quorum() == 2u);
  back.regain_workers(1);
  BOOST_TEST(back.quorum() == 3u);
  back.regain_workers(5);
  BOOST_TEST(back.quorum() == 3u);
  // A step that waited too long closes with what it has.
  ps_core slow{sgd_config(ps_mode::sync, 3), {0.0f}};
  BOOST_TEST(!slow.close_step()); // nothing to close
  slow.push(0, g.data(), 1);
  BOOST_TEST(slow.close_step());
  BOOST_TEST(std::abs(slow.weights()[0] + 0.2f) < 1e-6f); // the mean of one
  BOOST_TEST(slow.stats().timed_out == 1u);
  BOOST_TEST(slow.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(async_divides_the_rate_by_staleness_and_bounds_it) {
  auto cfg = sgd_config(ps_mode::async, 3, 1.0f);
  cfg.max_staleness = 2;
  ps_core ps{cfg, {0.0f}};
  std::vector<float> g{1.0f};
  ps.push(0, g.data(), 1);              // fresh: -1
  ps.push(0, g.data(), 1);              // staleness 1: -1
  auto third = ps.push(0, g.data(), 1); // staleness 2: -1/2
  BOOST_TEST(third.staleness == 2u);
  BOOST_TEST(std::abs(ps.weights()[0] + 2.5f) < 1e-6f);
  auto stale = ps.push(0, g.data(), 1); // staleness 3 > 2
  BOOST_TEST((stale.refused == ps_refusal::too_stale));
  BOOST_TEST(std::abs(ps.weights()[0] + 2.5f) < 1e-6f);
  BOOST_TEST(ps.stats().staleness.at(0) == 1u);
  BOOST_TEST(ps.stats().staleness.at(1) == 1u);
  BOOST_TEST(ps.stats().staleness.at(2) == 1u);
  BOOST_TEST(ps.stats().refused.at(ps_refusal::too_stale) == 1u);
  BOOST_TEST(ps.version() == 3u);
}

BOOST_AUTO_TEST_CASE(clipping_bounds_the_step) {
  auto cfg = sgd_config(ps_mode::async, 1, 1.0f);
  cfg.clip_norm = 1.0f;
  ps_core ps{cfg, {0.0f, 0.0f}};
  std::vector<float> g{6.0f, 8.0f};
  ps.push(0, g.data(), 2);
  BOOST_TEST(std::abs(ps.weights()[0] + 0.6f) < 1e-6f);
  BOOST_TEST(std::abs(ps.weights()[1] + 0.8f) < 1e-6f);
  BOOST_TEST(g[0] == 6.0f); // the caller's gradient is left alone
}

BOOST_AUTO_TEST_CASE(refused_input_changes_nothing_and_is_counted) {
  for (auto mode : {ps_mode::sync, ps_mode::async}) {
    ps_core ps{sgd_config(mode, 2), {1.0f, 2.0f}};
    std::vector<float> short_one{1.0f};
    std::vector<float> nan{1.0f, std::numeric_limits<float>::quiet_NaN()};
    std::vector<float> inf{std::numeric_limits<float>::infinity(), 1.0f};
    std::vector<float> ok{1.0f, 1.0f};
    auto r1 = ps.push(0, short_one.data(), 1);
    BOOST_TEST((r1.refused == ps_refusal::wrong_size));
    BOOST_TEST(r1.why.find("1 values for 2 parameters") != std::string::npos);
    BOOST_TEST((ps.push(0, nan.data(), 2).refused == ps_refusal::not_finite));
    BOOST_TEST((ps.push(0, inf.data(), 2).refused == ps_refusal::not_finite));
    auto r4 = ps.push(5, ok.data(), 2);
    BOOST_TEST((r4.refused == ps_refusal::future));
    BOOST_TEST(r4.why.find("version 5") != std::string::npos);
    BOOST_TEST((ps.weights() == std::vector<float>{1.0f, 2.0f}));
    BOOST_TEST(ps.version() == 0u);
    BOOST_TEST(ps.pending() == 0u);
    BOOST_TEST(ps.stats().refused.at(ps_refusal::not_finite) == 2u);
    BOOST_TEST(ps.stats().applied == 0u);
  }
}

BOOST_AUTO_TEST_CASE(configs_that_cannot_work_are_refused) {
  auto cfg = sgd_config(ps_mode::sync, 0);
  BOOST_CHECK_THROW((ps_core{cfg, {0.0f}}), lumen::usage_error);
  cfg = sgd_config(ps_mode::sync, 2);
  cfg.backup = 2;
  BOOST_CHECK_THROW((ps_core{cfg, {0.0f}}), lumen::usage_error);
  cfg.backup = 0;
  cfg.clip_norm = -1;
  BOOST_CHECK_THROW((ps_core{cfg, {0.0f}}), lumen::usage_error);
  // Async answers each push at a version of its own: no broadcast to share.
  cfg = sgd_config(ps_mode::async, 2);
  cfg.broadcast = codec::int8;
  BOOST_CHECK_THROW((ps_core{cfg, {0.0f}}), lumen::usage_error);
  cfg.mode = ps_mode::sync;
  BOOST_CHECK_NO_THROW((ps_core{cfg, {0.0f}}));
  cfg.broadcast = static_cast<codec>(7);
  BOOST_CHECK_THROW((ps_core{cfg, {0.0f}}), lumen::usage_error);
  // A deadline at or under the median step would close most steps early.
  cfg.broadcast = codec::none;
  for (double deadline : {1.0, 0.5, -2.0, std::nan("")}) {
    cfg.step_deadline = deadline;
    BOOST_CHECK_THROW((ps_core{cfg, {0.0f}}), lumen::usage_error);
  }
  cfg.step_deadline = 3;
  BOOST_CHECK_NO_THROW((ps_core{cfg, {0.0f}}));
}

// The seed's program without actors: three workers on shards of the
// synthetic regression, the server averaging (sync) or applying as they
// come with one worker three times slower (async): both reach the true
// weights to 1e-3.
BOOST_AUTO_TEST_CASE(sync_and_async_servers_fit_the_synthetic_regression) {
  auto problem = make_linear_regression(3000, 4, 11, 0.001f);
  linear_regression model{4};
  auto shards = lumen::test::shards_of(problem.data, 3, 1);
  for (auto mode : {ps_mode::sync, ps_mode::async}) {
    ps_core ps{sgd_config(mode, 3, mode == ps_mode::sync ? 0.3f : 0.2f),
               model.init(0)};
    std::vector<float> g(model.num_params());
    // Each worker computes on the weights it last pulled; in async mode
    // worker 2 pushes once for every three pushes of the others.
    std::vector<std::vector<float>> pulled(3, ps.weights());
    std::vector<uint64_t> at(3, 0);
    for (int tick = 0; tick < 3000; ++tick)
      for (size_t w = 0; w < 3; ++w) {
        if (mode == ps_mode::async && w == 2 && tick % 3 != 0)
          continue;
        model.loss_and_gradient(pulled[w].data(), shards[w], g.data());
        auto out = ps.push(at[w], g.data(), g.size());
        BOOST_REQUIRE((out.refused == ps_refusal::none));
        if (mode == ps_mode::async || out.closed_step)
          for (size_t v = 0; v < 3; ++v)
            if (mode == ps_mode::sync || v == w) {
              pulled[v] = ps.weights();
              at[v] = ps.version();
            }
      }
    for (size_t i = 0; i < 4; ++i)
      BOOST_TEST(std::abs(ps.weights()[i] - problem.weights[i]) < 1e-3f,
                 to_string(mode) << " weight " << i);
    BOOST_TEST(std::abs(ps.weights()[4] - problem.bias) < 1e-3f);
  }
}

BOOST_AUTO_TEST_SUITE_END()
