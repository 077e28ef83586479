#define BOOST_TEST_MODULE models
#include <boost/test/unit_test.hpp>

// The models' hand-written gradients against finite differences, each
// model learning what it should (the synthetic regression's true weights,
// Fashion-MNIST's classes), the same bits wherever a gradient lies, a
// loss that never looks good past float's range, and batches that do
// not fit them.

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <lumen/ml.hpp>

#include "gradient_check.hpp"

using namespace lumen::ml;

namespace {

/// A small classification batch with random features.
dataset random_batch(size_t n, size_t dim, size_t classes, uint64_t seed) {
  std::mt19937_64 gen{seed};
  std::normal_distribution<float> normal;
  dataset d;
  d.features = tensor({static_cast<int64_t>(n), static_cast<int64_t>(dim)});
  d.labels = tensor({static_cast<int64_t>(n)}, dtype::int32);
  for (size_t i = 0; i < n * dim; ++i)
    d.features.data<float>()[i] = normal(gen);
  for (size_t i = 0; i < n; ++i)
    d.labels.data<int32_t>()[i] = static_cast<int32_t>(gen() % classes);
  return d;
}

/// The analytic gradient at `params` against central differences on every
/// parameter: their cosine and the relative size of their difference.
void check_gradient(const model& m, std::vector<float> params,
                    const dataset& batch) {
  std::vector<float> grad(m.num_params());
  m.loss_and_gradient(params.data(), batch, grad.data());
  std::vector<float> numeric(m.num_params());
  const float eps = 1e-2f;
  for (size_t i = 0; i < params.size(); ++i) {
    auto [up, down] = losses_around(m, params, i, eps, batch);
    numeric[i] = static_cast<float>((up - down) / (2 * eps));
  }
  Eigen::Map<Eigen::VectorXf> a{grad.data(),
                                static_cast<Eigen::Index>(grad.size())};
  Eigen::Map<Eigen::VectorXf> b{numeric.data(),
                                static_cast<Eigen::Index>(numeric.size())};
  BOOST_TEST_MESSAGE(m.name() << ": |analytic| " << a.norm() << ", |diff| "
                              << (a - b).norm());
  BOOST_TEST(a.norm() > 0);
  BOOST_TEST(a.dot(b) / (a.norm() * b.norm()) > 0.999, m.name());
  BOOST_TEST((a - b).norm() / a.norm() < 0.02, m.name());
}

/// Plain SGD over `rows` of `train`, in batches of `batch`.
std::vector<float> sgd(const model& m, const dataset& train, size_t rows,
                       size_t batch, float lr, uint64_t seed) {
  auto w = m.init(seed);
  std::vector<float> g(m.num_params());
  auto order = shuffled_rows(train.size(), seed);
  order.resize(rows);
  for (size_t at = 0; at + batch <= order.size(); at += batch) {
    auto b =
      train.take({order.begin() + static_cast<std::ptrdiff_t>(at),
                  order.begin() + static_cast<std::ptrdiff_t>(at + batch)});
    m.loss_and_gradient(w.data(), b, g.data());
    for (size_t i = 0; i < w.size(); ++i)
      w[i] -= lr * g[i];
  }
  return w;
}

/// Fashion-MNIST, standardized.
struct fashion {
  dataset train = load_fashion_mnist(split::train);
  dataset test = load_fashion_mnist(split::test);
  fashion() {
    standardize(train, 0.2860f, 0.3530f);
    standardize(test, 0.2860f, 0.3530f);
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(models)

BOOST_AUTO_TEST_CASE(gradients_match_finite_differences) {
  auto reg = make_linear_regression(20, 4, 3, 0.1f);
  linear_regression lin{4};
  check_gradient(lin, {0.5f, -1.0f, 0.25f, 2.0f, 0.1f}, reg.data);
  auto batch = random_batch(16, 6, 3, 5);
  softmax_regression soft{6, 3};
  auto w = soft.init(0);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  check_gradient(soft, w, batch);
  mlp net{6, {5, 4}, 3};
  check_gradient(net, net.init(11), batch);
  BOOST_TEST(net.num_params() == 7u * 5 + 6 * 4 + 5 * 3);
  BOOST_TEST((mlp{784, {256, 128}, 10}.num_params() * 4) == 940584u);
}

BOOST_AUTO_TEST_CASE(a_gradient_has_the_same_bits_wherever_it_is_written) {
  // Training repeats to the bit only if a step's arithmetic does not
  // depend on where the buffers happen to lie.
  auto batch = random_batch(32, 784, 10, 3);
  mlp net{784, {256, 128}, 10};
  auto w = net.init(1);
  std::vector<float> first;
  for (size_t shift = 0; shift < 16; ++shift) {
    std::vector<float> buffer(w.size() + 16);
    float* grad = buffer.data() + shift;
    net.loss_and_gradient(w.data(), batch, grad);
    if (first.empty())
      first.assign(grad, grad + w.size());
    size_t differ = 0;
    for (size_t i = 0; i < w.size(); ++i)
      differ += std::memcmp(&first[i], grad + i, sizeof(float)) != 0;
    BOOST_TEST(differ == 0u,
               differ << " values differ " << shift << " floats along");
  }
}

BOOST_AUTO_TEST_CASE(logits_past_floats_range_give_nan_never_a_good_loss) {
  auto batch = random_batch(8, 6, 3, 5);
  mlp net{6, {5}, 3};
  for (float scale : {1e10f, 1e20f, 1e30f, 1e38f}) {
    auto w = net.init(2);
    for (auto& x : w)
      x *= scale;
    auto loss = net.loss(w.data(), batch);
    BOOST_TEST((std::isnan(loss) || loss >= 0), scale << ": " << loss);
  }
}

BOOST_AUTO_TEST_CASE(linear_regression_finds_the_true_weights) {
  auto p = make_linear_regression(1000, 5, 9, 0.01f);
  linear_regression m{5};
  auto w = m.init(0);
  std::vector<float> g(m.num_params());
  for (int step = 0; step < 500; ++step) {
    m.loss_and_gradient(w.data(), p.data, g.data());
    for (size_t i = 0; i < w.size(); ++i)
      w[i] -= 0.2f * g[i];
  }
  for (size_t i = 0; i < 5; ++i)
    BOOST_TEST(std::abs(w[i] - p.weights[i]) < 1e-3f, "weight " << i);
  BOOST_TEST(std::abs(w[5] - p.bias) < 1e-3f);
  BOOST_TEST(m.loss(w.data(), p.data) < 1e-4f);
  BOOST_CHECK_THROW(m.accuracy(w.data(), p.data), lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(softmax_regression_and_an_mlp_learn_fashion_mnist) {
  fashion data;
  softmax_regression soft{784, 10};
  auto w = sgd(soft, data.train, 20000, 64, 0.01f, 1);
  auto soft_acc = soft.accuracy(w.data(), data.test);
  BOOST_TEST_MESSAGE("softmax regression, 20,000 examples: " << soft_acc);
  BOOST_TEST(soft_acc > 0.77f);
  mlp net{784, {64}, 10};
  auto v = sgd(net, data.train, 20000, 64, 0.05f, 2);
  auto net_acc = net.accuracy(v.data(), data.test);
  BOOST_TEST_MESSAGE("mlp 784-64-10, 20,000 examples: " << net_acc);
  BOOST_TEST(net_acc > 0.77f);
  BOOST_TEST(net.loss(v.data(), data.test) <
             net.loss(net.init(2).data(), data.test));
}

BOOST_AUTO_TEST_CASE(batches_that_do_not_fit_are_usage_errors_naming_why) {
  softmax_regression soft{6, 3};
  auto w = soft.init(0);
  std::vector<float> g(soft.num_params());
  auto expect = [&](const dataset& b, const std::string& text) {
    try {
      soft.loss_and_gradient(w.data(), b, g.data());
      BOOST_ERROR("no error for: " << text);
    } catch (const lumen::usage_error& e) {
      BOOST_TEST(std::string{e.what()}.find(text) != std::string::npos,
                 e.what());
    }
  };
  expect(random_batch(4, 5, 3, 1), "takes 6 features a row; the batch has 5");
  auto bad_label = random_batch(4, 6, 3, 1);
  bad_label.labels.data<int32_t>()[2] = 3;
  expect(bad_label, "label 3 at row 2 is not a class (0-2)");
  auto regression = make_linear_regression(4, 6, 1).data;
  expect(regression, "takes int32 labels");
  dataset empty;
  empty.features = tensor({0, 6});
  expect(empty, "an empty batch");
  BOOST_CHECK_THROW((mlp{6, {}, 1}), lumen::usage_error);
  BOOST_CHECK_THROW((mlp{6, {0}, 3}), lumen::usage_error);
}

BOOST_AUTO_TEST_SUITE_END()
