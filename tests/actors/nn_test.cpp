#define BOOST_TEST_MODULE nn
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <lumen/errors.hpp>
#include <lumen/ml/data.hpp>
#include <lumen/ml/model_file.hpp>
#include <lumen/ml/safetensors.hpp>
#include <lumen/ml/text.hpp>
#include <lumen/nn/sequential.hpp>

#include "gradient_check.hpp"
#include "nn/layers.hpp"

namespace {

using lumen::nn::sequential;
using lumen::nn::shape;

/// `rows` examples of `in` values each, drawn from `seed`, with labels
/// below `classes`.
lumen::ml::dataset random_batch(size_t rows, size_t in, size_t classes,
                                uint64_t seed) {
  std::mt19937_64 gen{seed};
  std::normal_distribution<float> value;
  lumen::ml::dataset d;
  d.features = lumen::ml::tensor{{int64_t(rows), int64_t(in)}};
  d.labels = lumen::ml::tensor{{int64_t(rows)}, lumen::ml::dtype::int32};
  auto x = d.features.data<float>();
  for (size_t i = 0; i < rows * in; ++i)
    x[i] = value(gen);
  auto y = d.labels.data<int32_t>();
  for (size_t i = 0; i < rows; ++i)
    y[i] = int32_t(gen() % classes);
  return d;
}

/// The analytic gradient of `spec` on `in` against central differences,
/// at every parameter of every layer: the largest error relative to the
/// gradient's scale. A parameter whose step crosses a kink (a ReLU or a
/// pool's choice flips: the one-sided differences disagree) is left out;
/// at most a tenth may be.
double gradient_error(const shape& in, const std::string& spec,
                      const lumen::ml::dataset& batch) {
  sequential m{in, spec};
  auto w = m.init(7);
  // Biases away from zero, so that their gradients are checked through
  // the layers after them too.
  std::mt19937_64 gen{3};
  for (auto& v : w)
    v += float(int(gen() % 200) - 100) * 1e-3f;
  std::vector<float> g(w.size());
  m.loss_and_gradient(w.data(), batch, g.data());
  double worst = 0, scale = 1e-6;
  for (auto v : g)
    scale = std::max(scale, double(std::abs(v)));
  const double mid = m.loss(w.data(), batch);
  size_t kinks = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const float h = 1e-3f;
    auto [up, down] = losses_around(m, w, i, h, batch);
    if (std::abs((up - mid) - (mid - down)) / h > 0.005 * scale) {
      ++kinks;
      continue;
    }
    double numeric = (up - down) / (2.0 * h);
    worst = std::max(worst, std::abs(numeric - g[i]) / scale);
  }
  BOOST_TEST(kinks * 10 <= w.size(), spec << ": " << kinks << " kinks");
  return worst;
}

double gradient_error(const shape& in, const std::string& spec,
                      size_t classes) {
  return gradient_error(in, spec, random_batch(3, in.size(), classes, 11));
}

/// `rows` sequences of `length` tokens below `vocab`, each labelled with
/// its next tokens.
lumen::ml::dataset token_batch(size_t rows, size_t length, size_t vocab,
                               uint64_t seed) {
  std::mt19937_64 gen{seed};
  lumen::ml::dataset d;
  d.features = lumen::ml::tensor{{int64_t(rows), int64_t(length)}};
  d.labels = lumen::ml::tensor{{int64_t(rows), int64_t(length)},
                               lumen::ml::dtype::int32};
  std::vector<int32_t> text(rows * (length + 1));
  for (auto& t : text)
    t = int32_t(gen() % vocab);
  for (size_t r = 0; r < rows; ++r)
    for (size_t t = 0; t < length; ++t) {
      d.features.data<float>()[r * length + t] =
        float(text[r * (length + 1) + t]);
      d.labels.data<int32_t>()[r * length + t] = text[r * (length + 1) + t + 1];
    }
  return d;
}

} // namespace

BOOST_AUTO_TEST_SUITE(nn)

BOOST_AUTO_TEST_CASE(each_layers_gradient_matches_finite_differences) {
  // One case a layer, each behind the layers whose gradient depends on
  // its backward pass.
  BOOST_TEST(gradient_error({6, 1, 1}, "linear(4)", 4) < 2e-3);
  BOOST_TEST(gradient_error({6, 1, 1}, "linear(5)-relu-linear(3)", 3) < 2e-3);
  BOOST_TEST(gradient_error({6, 1, 1}, "linear(5)-gelu-linear(3)", 3) < 2e-3);
  BOOST_TEST(gradient_error({2, 5, 5}, "conv(3,3)-flatten-linear(4)", 4) <
             2e-3);
  BOOST_TEST(gradient_error({2, 4, 4}, "conv(2,3,1)-linear(3)", 3) < 2e-3);
  BOOST_TEST(gradient_error({2, 4, 4}, "conv(2,3,1)-relu-linear(3)", 3) < 2e-3);
  BOOST_TEST(gradient_error({1, 6, 6}, "conv(2,3)-pool(2)-linear(3)", 3) <
             2e-3);
  // Windows that leave the last row and column out (5×5), and of 3×3.
  BOOST_TEST(gradient_error({1, 6, 6}, "conv(2,2)-pool(2)-linear(3)", 3) <
             2e-3);
  BOOST_TEST(gradient_error({1, 7, 7}, "conv(2,2)-pool(3)-linear(3)", 3) <
             2e-3);
  BOOST_TEST(gradient_error({1, 8, 8},
                            "conv(2,3)-relu-pool(2)-conv(2,2)-relu-linear(3)",
                            3) < 2e-3);
}

BOOST_AUTO_TEST_CASE(each_sequence_layers_gradient_matches_finite_differences) {
  auto tokens = token_batch(2, 5, 7, 13);
  BOOST_TEST(gradient_error({1, 5, 1}, "embed(7,4)-dense(7)", tokens) < 2e-3);
  BOOST_TEST(gradient_error({1, 5, 1}, "embed(7,6)-norm-dense(7)", tokens) <
             2e-3);
  BOOST_TEST(gradient_error({1, 5, 1}, "embed(7,6)-attn(2)-dense(7)", tokens) <
             2e-3);
  BOOST_TEST(gradient_error({1, 5, 1}, "embed(7,6)-res(dense(6)-gelu)-dense(7)",
                            tokens) < 2e-3);
  // A transformer block, as the character GPT stacks them.
  BOOST_TEST(gradient_error({1, 5, 1},
                            "embed(7,8)-res(norm-attn(2))-res(norm-dense(16)-"
                            "gelu-dense(8))-norm-dense(7)",
                            tokens) < 2e-3);
}

BOOST_AUTO_TEST_CASE(dropout_drops_in_training_alone_and_alike_for_a_batch) {
  sequential with{{6, 1, 1}, "linear(40)-dropout(50)-linear(3)"};
  sequential without{{6, 1, 1}, "linear(40)-linear(3)"};
  auto w = with.init(2);
  auto batch = random_batch(1, 6, 3, 4);
  // Evaluation passes everything.
  BOOST_TEST(with.loss(w.data(), batch) == without.loss(w.data(), batch));
  BOOST_TEST((with.outputs(w.data(), batch.features) ==
              without.outputs(w.data(), batch.features)));
  // Training drops about half the 40 units: their weights get no
  // gradient. The same batch drops the same ones.
  std::vector<float> g(w.size()), again(w.size());
  with.loss_and_gradient(w.data(), batch, g.data());
  with.loss_and_gradient(w.data(), batch, again.data());
  BOOST_TEST(g == again);
  size_t dropped = 0;
  for (size_t unit = 0; unit < 40; ++unit) {
    bool none = true;
    for (size_t in = 0; in < 6; ++in)
      none = none && g[in * 40 + unit] == 0.0f;
    dropped += none;
  }
  BOOST_TEST(dropped >= 10u);
  BOOST_TEST(dropped <= 30u);
  // Another example, another mask.
  auto other = random_batch(1, 6, 3, 5);
  with.loss_and_gradient(w.data(), other, again.data());
  size_t same = 0;
  for (size_t unit = 0; unit < 40; ++unit)
    same += (g[unit] == 0.0f) == (again[unit] == 0.0f);
  BOOST_TEST(same < 40u);
}

BOOST_AUTO_TEST_CASE(attention_sees_no_later_position) {
  // A later token changed leaves every earlier position's logits as they
  // were, to the bit: what generating text a token at a time relies on.
  sequential m{{1, 6, 1}, "embed(5,8)-res(norm-attn(2))-norm-dense(5)"};
  auto w = m.init(3);
  auto a = token_batch(1, 6, 5, 1).features;
  auto b = a.clone();
  b.data<float>()[4] = float((int(a.data<float>()[4]) + 1) % 5);
  auto ya = m.outputs(w.data(), a), yb = m.outputs(w.data(), b);
  BOOST_REQUIRE(ya.size() == 6u * 5u);
  for (size_t i = 0; i < ya.size(); ++i)
    BOOST_TEST((ya[i] == yb[i]) == (i < 4 * 5), "logit " << i);
}

BOOST_AUTO_TEST_CASE(the_fashion_mnist_cnn_has_its_shapes_and_named_tensors) {
  sequential cnn{{1, 28, 28},
                 "conv(32,3)-relu-pool(2)-conv(64,3)-relu-pool(2)-linear(128)-"
                 "relu-linear(10)"};
  // 28 -> 26 -> 13 -> 11 -> 5: 64·5·5 = 1600 values into linear(128).
  auto want =
    (32 * 9 + 32) + (64 * 32 * 9 + 64) + (1600 * 128 + 128) + (128 * 10 + 10);
  BOOST_TEST(cnn.num_params() == size_t(want));
  auto summary = cnn.summary();
  BOOST_TEST(summary.find("layers.6 linear(128) -> 128") != std::string::npos,
             summary);
  BOOST_TEST(summary.find("layers.3 conv(64,3) -> 64x11x11") !=
               std::string::npos,
             summary);
  auto tensors = cnn.tensors();
  BOOST_REQUIRE(tensors.size() == 8u);
  BOOST_TEST(tensors[0].name == "layers.0.weight");
  BOOST_TEST(tensors[0].range.size() == 32u * 9u);
  BOOST_TEST((tensors[0].shape == std::vector<int64_t>{32, 1, 3, 3}));
  BOOST_TEST((tensors[3].shape == std::vector<int64_t>{64}));
  BOOST_TEST(tensors[6].name == "layers.8.weight");
  BOOST_TEST((tensors[4].shape == std::vector<int64_t>{64 * 5 * 5, 128}));
  BOOST_TEST(tensors[7].name == "layers.8.bias");
  BOOST_TEST(tensors[7].range.end == cnn.num_params());
  // The layers with parameters tile the flat vector, in order.
  size_t at = 0;
  for (auto& r : cnn.layers()) {
    BOOST_TEST(r.begin == at);
    at = r.end;
  }
  BOOST_TEST(at == cnn.num_params());
}

BOOST_AUTO_TEST_CASE(backward_tells_each_layer_ready_the_last_first) {
  sequential m{{1, 6, 6}, "conv(2,3)-relu-pool(2)-linear(4)-relu-linear(3)"};
  auto w = m.init(1);
  std::vector<float> g(w.size()), plain(w.size());
  std::vector<size_t> order;
  auto batch = random_batch(4, 36, 3, 2);
  m.loss_and_gradient(w.data(), batch, g.data(),
                      [&](size_t l) { order.push_back(l); });
  BOOST_TEST(order == (std::vector<size_t>{2, 1, 0}));
  // The same gradient to the bit as without being told.
  m.loss_and_gradient(w.data(), batch, plain.data());
  BOOST_TEST(g == plain);
}

BOOST_AUTO_TEST_CASE(a_small_cnn_learns_a_batch) {
  sequential m{{1, 8, 8}, "conv(4,3)-relu-pool(2)-linear(3)"};
  auto w = m.init(5);
  auto batch = random_batch(12, 64, 3, 9);
  std::vector<float> g(w.size());
  float first = m.loss_and_gradient(w.data(), batch, g.data()), last = 0;
  for (int step = 0; step < 200; ++step) {
    last = m.loss_and_gradient(w.data(), batch, g.data());
    for (size_t i = 0; i < w.size(); ++i)
      w[i] -= 0.1f * g[i];
  }
  BOOST_TEST(last < 0.2f * first, first << " -> " << last);
  BOOST_TEST(m.accuracy(w.data(), batch) == 1.0f);
}

BOOST_AUTO_TEST_CASE(bad_specs_and_shapes_say_where_and_what) {
  auto said = [](const shape& in, const std::string& spec) {
    try {
      sequential m{in, spec};
    } catch (const lumen::usage_error& e) {
      return std::string{e.what()};
    }
    return std::string{"no error"};
  };
  auto a = said({1, 28, 28}, "conv(32,3)-relu-pol(2)-linear(10)");
  BOOST_TEST(a.find("layer 2 (at character 17), an unknown layer 'pol'") !=
               std::string::npos,
             a);
  BOOST_TEST(a.find("the layers are linear(N)") != std::string::npos, a);
  auto b = said({1, 28, 28}, "conv(32,3-relu");
  BOOST_TEST(
    b.find("at character 10, expected ',' or ')'") != std::string::npos, b);
  auto c = said({1, 4, 4}, "pool(2)-conv(8,3)-linear(10)");
  BOOST_TEST(c.find("layer 1 (at character 9), conv(8,3): its input 1x2x2 is "
                    "smaller than a 3x3 kernel") != std::string::npos,
             c);
  auto d = said({1, 28, 28}, "linear(10)-");
  BOOST_TEST(
    d.find("at character 12, expected a layer's name") != std::string::npos, d);
  auto e = said({1, 28, 28}, "conv(8,3)-relu");
  BOOST_TEST(e.find("end with linear(K)") == std::string::npos, e);
  auto f = said({1, 28, 28}, "linear(1)");
  BOOST_TEST(f.find("end with linear(K) for K classes") != std::string::npos,
             f);
  auto g = said({1, 28, 28}, "relu(2)-linear(10)");
  BOOST_TEST(g.find("relu(2): write it relu, without arguments") !=
               std::string::npos,
             g);
  // A batch of the wrong width: which model, which sizes.
  sequential m{{1, 28, 28}, "linear(10)"};
  auto w = m.init(1);
  auto batch = random_batch(2, 10, 10, 1);
  BOOST_CHECK_EXCEPTION(m.loss(w.data(), batch), lumen::usage_error,
                        [](const lumen::usage_error& e) {
                          return std::string{e.what()}.find(
                                   "takes 784 features a row; the batch has "
                                   "10") != std::string::npos;
                        });
}

BOOST_AUTO_TEST_CASE(max_pooling_takes_each_windows_largest_input) {
  // Even sizes (pairs of rows, rows of 7 and 14 windows spilling into the
  // next ones, the choices kept for backward) and odd ones (the edge left
  // out), against each window's maximum and the first input equal to it.
  using lumen::nn::matrix;
  for (shape in :
       {shape{2, 6, 4}, shape{2, 5, 7}, shape{3, 14, 14}, shape{2, 28, 28}}) {
    auto pool = lumen::nn::make_image_layer("pool", {2}, in);
    auto batch = random_batch(3, in.size(), 2, 4);
    matrix x = lumen::nn::const_matrix_map{batch.features.data<float>(), 3,
                                           Eigen::Index(in.size())};
    for (Eigen::Index i = 0; i < x.size(); i += 5)
      x.data()[i] = x.data()[(i + 1) % x.size()]; // ties
    matrix y, dy, dx, other, dx_again;
    pool->forward(nullptr, x, y);
    dy = matrix::Random(y.rows(), y.cols());
    pool->backward(nullptr, x, y, dy, &dx, nullptr);
    matrix want = matrix::Zero(x.rows(), x.cols());
    size_t oh = in.height / 2, ow = in.width / 2;
    for (Eigen::Index e = 0; e < 3; ++e)
      for (size_t c = 0; c < in.channels; ++c)
        for (size_t oy = 0; oy < oh; ++oy)
          for (size_t ox = 0; ox < ow; ++ox) {
            auto first = (c * in.height + 2 * oy) * in.width + 2 * ox;
            std::vector<size_t> at{first, first + 1, first + in.width,
                                   first + in.width + 1};
            float most = x(e, Eigen::Index(at[0]));
            for (auto a : at)
              most = std::max(most, x(e, Eigen::Index(a)));
            auto o = Eigen::Index((c * oh + oy) * ow + ox);
            BOOST_TEST(y(e, o) == most);
            for (auto a : at)
              if (x(e, Eigen::Index(a)) == most) {
                want(e, Eigen::Index(a)) = dy(e, o);
                break;
              }
          }
    BOOST_TEST(dx.cwiseEqual(want).all(), to_string(in));
    // Handed an output of another forward pass, backward finds the
    // choices again.
    pool->forward(nullptr, x * 2.0f, other);
    pool->backward(nullptr, x, y, dy, &dx_again, nullptr);
    BOOST_TEST(dx_again.cwiseEqual(want).all(), to_string(in));
  }
}

BOOST_AUTO_TEST_CASE(relu_runs_after_the_pooling_it_precedes_to_the_bit) {
  // The two orders, layer by layer, on values with negative windows and
  // ties: the same outputs and input gradients, bit for bit.
  using lumen::nn::matrix;
  shape in{3, 6, 4};
  auto relu = lumen::nn::make_layer("relu", {}, in);
  auto pool = lumen::nn::make_image_layer("pool", {2}, in);
  auto relu_after = lumen::nn::make_layer("relu", {}, pool->out());
  auto batch = random_batch(4, in.size(), 2, 8);
  matrix x = lumen::nn::const_matrix_map{batch.features.data<float>(), 4,
                                         Eigen::Index(in.size())};
  for (Eigen::Index i = 0; i < x.size(); i += 3)
    x.data()[i] = x.data()[i / 2] - 1.0f; // ties, and negative windows
  matrix r, rp, p, pr, dy, d1, d2, d3, d4;
  relu->forward(nullptr, x, r);
  pool->forward(nullptr, r, rp);
  pool->forward(nullptr, x, p);
  relu_after->forward(nullptr, p, pr);
  BOOST_TEST(rp.cwiseEqual(pr).all());
  dy = matrix::Random(rp.rows(), rp.cols());
  pool->backward(nullptr, r, rp, dy, &d1, nullptr);
  relu->backward(nullptr, x, r, d1, &d2, nullptr);
  relu_after->backward(nullptr, p, pr, dy, &d3, nullptr);
  pool->backward(nullptr, x, p, d3, &d4, nullptr);
  BOOST_TEST(d2.cwiseEqual(d4).all());
  BOOST_TEST((d2.array() != 0).count() > 0);
  // And a model runs them so, its errors still naming layers by their
  // place in the spec.
  sequential m{in, "relu-pool(2)-linear(2)"};
  BOOST_TEST(m.summary().find("layers.0 pool(2)") != std::string::npos,
             m.summary());
  try {
    sequential{{1, 1, 3}, "relu-pool(2)-linear(2)"};
    BOOST_ERROR("a window larger than the input was taken");
  } catch (const lumen::usage_error& e) {
    BOOST_TEST(std::string{e.what()}.find("layer 1 (at character 6)") !=
                 std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(a_large_batch_is_evaluated_in_slices_as_in_one) {
  sequential m{{1, 6, 6}, "conv(3,3)-relu-linear(4)"};
  auto w = m.init(5);
  auto batch = random_batch(600, 36, 4, 9);
  std::vector<float> g(m.num_params());
  // loss_and_gradient runs the batch whole; loss() slices it.
  auto whole = m.loss_and_gradient(w.data(), batch, g.data());
  BOOST_TEST(m.loss(w.data(), batch) == whole,
             boost::test_tools::tolerance(1e-5f));
  lumen::ml::dataset tail{batch.features.rows(512, 600),
                          batch.labels.rows(512, 600)};
  lumen::ml::dataset head{batch.features.rows(0, 512),
                          batch.labels.rows(0, 512)};
  auto right =
    m.accuracy(w.data(), head) * 512 + m.accuracy(w.data(), tail) * 88;
  BOOST_TEST(m.accuracy(w.data(), batch) * 600 == right,
             boost::test_tools::tolerance(1e-4f));
}

BOOST_AUTO_TEST_CASE(a_text_is_evaluated_in_slices_of_rows_as_in_one) {
  // 400 windows of 24 are 9,600 rows: three slices of at most 4,096 rows
  // (a validation text's windows whole took gigabytes).
  std::vector<uint8_t> tokens(12000);
  std::mt19937_64 gen{5};
  for (auto& t : tokens)
    t = uint8_t(gen() % 37);
  std::vector<size_t> starts;
  for (size_t k = 0; k < 400; ++k)
    starts.push_back(k * 29);
  auto batch = lumen::ml::text_windows(tokens, starts, 24);
  sequential m{{1, 24, 1},
               "embed(37,32)-res(norm-attn(2))-res(norm-dense(64)-gelu-"
               "dense(32))-norm-dense(37)"};
  auto w = m.init(4);
  std::vector<float> g(m.num_params());
  auto whole = m.loss_and_gradient(w.data(), batch, g.data());
  BOOST_TEST(m.loss(w.data(), batch) == whole,
             boost::test_tools::tolerance(1e-5f));
  std::vector<size_t> first(starts.begin(), starts.begin() + 100);
  std::vector<size_t> rest(starts.begin() + 100, starts.end());
  auto right =
    m.accuracy(w.data(), lumen::ml::text_windows(tokens, first, 24)) * 100 +
    m.accuracy(w.data(), lumen::ml::text_windows(tokens, rest, 24)) * 300;
  BOOST_TEST(m.accuracy(w.data(), batch) * 400 == right,
             boost::test_tools::tolerance(1e-4f));
}

BOOST_AUTO_TEST_CASE(a_model_file_holds_each_layer_by_name_and_shape) {
  namespace ml = lumen::ml;
  auto spec =
    ml::sequential_spec("conv(4,3,1)-relu-pool(2)-linear(10)", 1, 6, 6);
  BOOST_TEST(spec.classes == 10u);
  ml::model_file f{spec, ml::make_model(spec)->init(3), {}, {{"k", "v"}}};
  auto bytes = ml::model_file_bytes(f);
  auto back = ml::parse_model_file(bytes, "cnn.safetensors");
  BOOST_TEST((back.spec == spec));
  BOOST_TEST(back.params == f.params);
  BOOST_TEST(back.metadata == f.metadata);
  // As numpy reads it: PyTorch's layout for the convolution, [in, out]
  // for the linear layer, the layers' spec and the input's shape.
  auto file = ml::parse_safetensors(bytes, "cnn.safetensors");
  BOOST_TEST((file.tensors.at("layers.0.weight").shape() ==
              std::vector<int64_t>{4, 1, 3, 3}));
  BOOST_TEST(
    (file.tensors.at("layers.0.bias").shape() == std::vector<int64_t>{4}));
  BOOST_TEST((file.tensors.at("layers.3.weight").shape() ==
              std::vector<int64_t>{4 * 3 * 3, 10}));
  BOOST_TEST(file.metadata.at("lumen.model") == "sequential");
  BOOST_TEST(file.metadata.at("architecture") == spec.layers);
  BOOST_TEST(file.metadata.at("lumen.input") == "1x6x6");
  BOOST_TEST(file.tensors.at("layers.0.weight").data<float>()[5] ==
             f.params[5]);
  // "forward" tells what each kind of layer the model uses computes, and
  // only those.
  auto told = [](const std::string& forward, const std::string& what) {
    return forward.find(what) != std::string::npos;
  };
  auto cnn = file.metadata.at("forward");
  for (auto* used : {"conv(C,K[,P]) a cross-correlation", "relu max(h, 0)",
                     "pool(K) max over", "linear(N) flatten(h)"})
    BOOST_TEST(told(cnn, used), cnn);
  BOOST_TEST(!told(cnn, "attn(H)"), cnn);
  auto gpt = ml::sequential_spec(
    "embed(5,8)-res(norm-attn(2))-res(norm-dense(16)-gelu-dense(8))-"
    "norm-dense(5)",
    1, 4, 1);
  auto gpt_file = ml::parse_safetensors(
    ml::model_file_bytes({gpt, ml::make_model(gpt)->init(3), {}, {}}),
    "gpt.safetensors");
  auto forward = gpt_file.metadata.at("forward");
  for (auto* used :
       {"embed(V,D) on T token ids", "row t of position [T, D]",
        "norm at each position", "sqrt(variance + 1e-5)",
        "attn(H) causal self-attention", "softmax(q k^T / sqrt(D/H)) v",
        "res(...) h plus", "dense(N) at each position", "gelu h * Phi(h)"})
    BOOST_TEST(told(forward, used), forward);
  BOOST_TEST(!told(forward, "conv("), forward);
  // Each tensor the words name is in the file, under its layer's number
  // (res( and its ")" counted).
  for (auto* name : {"layers.0.token", "layers.0.position", "layers.2.weight",
                     "layers.3.qkv.weight", "layers.3.out.bias",
                     "layers.7.weight", "layers.9.weight", "layers.11.bias"})
    BOOST_TEST(gpt_file.tensors.count(name) == 1u, name);

  // The file with one thing changed is refused, saying what.
  auto refused = [&](auto change, const std::string& says) {
    auto damaged = file;
    change(damaged);
    try {
      ml::parse_model_file(ml::safetensors_bytes(damaged), "cnn.safetensors");
      BOOST_ERROR("a damaged model file was read: " << says);
    } catch (const ml::data_error& e) {
      BOOST_TEST(std::string{e.what()}.find(says) != std::string::npos,
                 e.what());
      BOOST_TEST(std::string{e.what()}.find("cnn.safetensors") !=
                 std::string::npos);
    }
  };
  refused([](auto& d) { d.metadata.erase("lumen.input"); },
          "no \"lumen.input\" of channels x height x width");
  refused([](auto& d) { d.metadata["lumen.input"] = "1x6"; },
          "no \"lumen.input\" of channels x height x width");
  refused(
    [](auto& d) {
      d.metadata["architecture"] = "conv(4,3,1)-relu-poo(2)-linear(10)";
    },
    "an unknown layer 'poo'");
  refused(
    [](auto& d) {
      d.metadata["architecture"] = "conv(4,3,1)-relu-pool(2)-linear(7)";
    },
    "layers.3.weight is float32[36, 10] where the "
    "conv(4,3,1)-relu-pool(2)-linear(7) architecture needs float32[36, 7]");
  refused(
    [](auto& d) {
      d.tensors["layers.0.weight"] = ml::tensor{{4, 1, 9}};
    },
    "layers.0.weight is float32[4, 1, 9]");
  refused([](auto& d) { d.tensors.erase("layers.3.bias"); },
          "no tensor layers.3.bias");
}

BOOST_AUTO_TEST_CASE(a_gradient_is_the_same_bits_wherever_its_buffers_lie) {
  // Eigen takes a vector's unaligned head a value at a time and the rest
  // in packets, whose exp and sums round differently: a gradient that
  // followed its buffers' addresses would make runs differ to the bit.
  std::vector<uint8_t> tokens(4000);
  std::mt19937_64 gen{11};
  for (auto& t : tokens)
    t = uint8_t(gen() % 37);
  auto batch = lumen::ml::text_windows(tokens, {0, 900, 2100}, 24);
  sequential m{{1, 24, 1},
               "embed(37,32)-res(norm-attn(2))-res(norm-dense(128)-gelu-"
               "dense(32))-norm-dense(37)"};
  auto w = m.init(3);
  std::vector<float> first;
  for (size_t shift = 0; shift < 16; ++shift) {
    std::vector<float> wb(w.size() + 16), gb(w.size() + 16);
    std::copy(w.begin(), w.end(), wb.begin() + long(shift));
    m.loss_and_gradient(wb.data() + shift, batch, gb.data() + shift);
    std::vector<float> g(gb.begin() + long(shift),
                         gb.begin() + long(shift + w.size()));
    if (first.empty())
      first = g;
    BOOST_TEST_INFO("parameters shifted by " << shift << " floats");
    BOOST_TEST(std::memcmp(g.data(), first.data(), g.size() * 4) == 0);
  }
}

BOOST_AUTO_TEST_SUITE_END()
