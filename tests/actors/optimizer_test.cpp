#define BOOST_TEST_MODULE optimizer
#include <boost/test/unit_test.hpp>

// The update rules against their definitions (torch.optim's), clipping,
// the staleness scale, and configurations that make no sense.

#include <cmath>
#include <cstring>
#include <vector>

#include <lumen/errors.hpp>
#include <lumen/ml.hpp>

using namespace lumen::ml;

BOOST_AUTO_TEST_SUITE(optimizer_suite)

BOOST_AUTO_TEST_CASE(sgd_and_momentum_follow_their_definitions) {
  std::vector<float> w{1.0f, -2.0f}, g{0.5f, 1.0f};
  optimizer sgd{{optimizer_kind::sgd, 0.1f}, 2};
  sgd.step(w.data(), g.data(), 2);
  BOOST_TEST(w[0] == 0.95f);
  BOOST_TEST(w[1] == -2.1f);
  sgd.step(w.data(), g.data(), 2, 0.5f); // a stale gradient: half the rate
  BOOST_TEST(std::abs(w[0] - 0.925f) < 1e-7f);
  std::vector<float> v{1.0f};
  std::vector<float> gv{1.0f};
  optimizer_config cfg{optimizer_kind::momentum, 0.1f};
  optimizer mom{cfg, 1};
  mom.step(v.data(), gv.data(), 1); // velocity 1
  mom.step(v.data(), gv.data(), 1); // velocity 0.9 + 1
  BOOST_TEST(std::abs(v[0] - (1.0f - 0.1f - 0.19f)) < 1e-6f);
  BOOST_TEST(mom.steps() == 2u);
  BOOST_TEST(mom.state().size() == 1u);
}

BOOST_AUTO_TEST_CASE(weight_decay_adds_the_weights_to_the_gradient) {
  // torch.optim: d = g + wd·w, then the rule as before.
  std::vector<float> w{2.0f}, g{0.5f};
  optimizer_config cfg{optimizer_kind::momentum, 0.1f};
  cfg.weight_decay = 0.25f;
  optimizer mom{cfg, 1};
  mom.step(w.data(), g.data(), 1); // d = 0.5 + 0.5 = 1, velocity 1
  BOOST_TEST(std::abs(w[0] - 1.9f) < 1e-6f);
  mom.step(w.data(), g.data(), 1); // d = 0.5 + 0.475, velocity 0.9 + 0.975
  BOOST_TEST(std::abs(w[0] - (1.9f - 0.1f * 1.875f)) < 1e-6f);
  optimizer_config bad{optimizer_kind::sgd, 0.1f};
  bad.weight_decay = -1.0f;
  BOOST_CHECK_THROW((optimizer{bad, 1}), lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(adam_follows_its_definition_with_bias_correction) {
  std::vector<float> w{0.0f};
  optimizer adam{{optimizer_kind::adam, 0.001f}, 1};
  // Step 1: m̂ = g, v̂ = g², so the step is lr·g/(|g| + eps) = lr.
  std::vector<float> g{4.0f};
  adam.step(w.data(), g.data(), 1);
  BOOST_TEST(std::abs(w[0] + 0.001f) < 1e-7f);
  // Step 2 with g = 2: m = 0.9·0.4 + 0.1·2, v = 0.999·0.016 + 0.001·4.
  g[0] = 2.0f;
  adam.step(w.data(), g.data(), 1);
  double m = (0.9 * 0.4 + 0.2) / (1 - 0.81);
  double v = (0.999 * 0.016 + 0.004) / (1 - 0.999 * 0.999);
  BOOST_TEST(std::abs(w[0] - (-0.001 - 0.001 * m / (std::sqrt(v) + 1e-8))) <
             1e-6);
  BOOST_TEST(adam.state().size() == 2u);
}

BOOST_AUTO_TEST_CASE(a_step_is_the_same_bits_wherever_its_buffers_lie) {
  // Eigen takes an array's unaligned head and tail a value at a time and
  // the rest in packets: were the two to round differently, the weights
  // would follow their addresses and two runs of one seed would differ.
  for (auto kind :
       {optimizer_kind::sgd, optimizer_kind::momentum, optimizer_kind::adam}) {
    optimizer_config cfg{kind, 0.01f};
    cfg.weight_decay = 0.001f;
    std::vector<float> first;
    for (size_t shift = 0; shift < 16; ++shift) {
      // Gradients of every scale, as a model's are; the gradient's buffer
      // shifted apart from the weights'.
      const size_t n = 1000;
      std::vector<float> w(n + 16), g(n + 16);
      auto gs = shift * 5 % 16;
      for (size_t i = 0; i < n; ++i) {
        w[shift + i] = std::sin(float(i)) * 0.3f;
        g[gs + i] = std::cos(float(i) * 0.7f) * std::exp(-float(i % 37) / 2);
      }
      optimizer opt{cfg, n};
      for (int step = 0; step < 3; ++step)
        opt.step(w.data() + shift, g.data() + gs, n, 0.5f);
      // Clipping sums the squares: in one order wherever they lie.
      clip_by_global_norm(w.data() + shift, n, 0.5f);
      std::vector<float> mine(w.begin() + long(shift),
                              w.begin() + long(shift + n));
      if (first.empty())
        first = mine;
      BOOST_TEST_INFO(to_string(kind)
                      << ", buffers shifted by " << shift << " floats");
      BOOST_TEST(std::memcmp(mine.data(), first.data(), n * 4) == 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(every_optimizer_minimizes_a_quadratic) {
  for (auto kind :
       {optimizer_kind::sgd, optimizer_kind::momentum, optimizer_kind::adam}) {
    std::vector<float> w{3.0f, -4.0f}, g(2);
    optimizer opt{{kind, kind == optimizer_kind::adam ? 0.05f : 0.05f}, 2};
    for (int step = 0; step < 2000; ++step) {
      g = {w[0] - 1.0f, 2 * (w[1] + 2.0f)}; // minimum at (1, -2)
      opt.step(w.data(), g.data(), 2);
    }
    BOOST_TEST(std::abs(w[0] - 1.0f) < 1e-2f, to_string(kind));
    BOOST_TEST(std::abs(w[1] + 2.0f) < 1e-2f, to_string(kind));
  }
}

BOOST_AUTO_TEST_CASE(clipping_scales_to_the_norm_and_only_above_it) {
  std::vector<float> g{3.0f, 4.0f};
  BOOST_TEST(clip_by_global_norm(g.data(), 2, 10.0f) == 5.0f);
  BOOST_TEST(g[0] == 3.0f);
  BOOST_TEST(clip_by_global_norm(g.data(), 2, 1.0f) == 5.0f);
  BOOST_TEST(std::abs(g[0] - 0.6f) < 1e-6f);
  BOOST_TEST(std::abs(g[1] - 0.8f) < 1e-6f);
  BOOST_CHECK_THROW(clip_by_global_norm(g.data(), 2, 0.0f), lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(staleness_divides_the_rate_and_bad_configs_are_refused) {
  BOOST_TEST(staleness_scale(0) == 1.0f);
  BOOST_TEST(staleness_scale(1) == 1.0f);
  BOOST_TEST(staleness_scale(4) == 0.25f);
  BOOST_CHECK_THROW((optimizer{{optimizer_kind::sgd, 0.0f}, 2}),
                    lumen::usage_error);
  BOOST_CHECK_THROW((optimizer{{optimizer_kind::sgd, NAN}, 2}),
                    lumen::usage_error);
  optimizer_config bad{optimizer_kind::momentum, 0.1f};
  bad.momentum = 1.0f;
  BOOST_CHECK_THROW((optimizer{bad, 2}), lumen::usage_error);
  optimizer ok{{optimizer_kind::sgd, 0.1f}, 2};
  std::vector<float> w(3), g(3);
  BOOST_CHECK_THROW(ok.step(w.data(), g.data(), 3), lumen::usage_error);
}

BOOST_AUTO_TEST_SUITE_END()
