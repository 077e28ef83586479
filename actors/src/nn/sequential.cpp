#include "lumen/nn/sequential.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "lumen/errors.hpp"

#include "nn/layers.hpp"

namespace lumen::nn {

namespace {

using ml::detail::idx;

const char* const layer_forms =
  "the layers are linear(N), conv(C,K[,P]), pool(K), relu, gelu and "
  "flatten, joined by '-'";

/// A spec's layers: each name, its arguments, where it starts.
struct parsed_layer {
  std::string name;
  std::vector<size_t> args;
  size_t at = 0;
};

std::vector<parsed_layer> parse(const std::string& spec) {
  auto fail = [&](size_t at, const std::string& what) -> usage_error {
    return usage_error("model spec \"" + spec + "\": at character " +
                       std::to_string(at + 1) + ", " + what + "; " +
                       layer_forms);
  };
  std::vector<parsed_layer> out;
  size_t i = 0;
  for (;;) {
    parsed_layer l;
    l.at = i;
    while (i < spec.size() && std::isalpha(static_cast<unsigned char>(spec[i])))
      l.name += spec[i++];
    if (l.name.empty())
      throw fail(i, "expected a layer's name");
    if (i < spec.size() && spec[i] == '(') {
      ++i;
      for (;;) {
        size_t digits = 0, value = 0;
        while (i < spec.size() &&
               std::isdigit(static_cast<unsigned char>(spec[i])) &&
               digits < 9) {
          value = value * 10 + size_t(spec[i++] - '0');
          ++digits;
        }
        if (digits == 0)
          throw fail(i, "expected a number");
        l.args.push_back(value);
        if (i < spec.size() && spec[i] == ',') {
          ++i;
          continue;
        }
        if (i < spec.size() && spec[i] == ')') {
          ++i;
          break;
        }
        throw fail(i, "expected ',' or ')'");
      }
    }
    out.push_back(std::move(l));
    if (i == spec.size())
      return out;
    if (spec[i] != '-')
      throw fail(i, "expected '-' before the next layer");
    ++i;
  }
}

} // namespace

std::string to_string(const shape& s) {
  if (s.height == 1 && s.width == 1)
    return std::to_string(s.channels);
  return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
         std::to_string(s.width);
}

sequential::sequential(shape input, const std::string& spec)
  : input_(input)
  , spec_(spec) {
  if (input.size() == 0)
    throw usage_error("model spec \"" + spec +
                      "\": an input of no values; give its shape");
  auto at = input;
  auto parsed = parse(spec);
  for (size_t l = 0; l < parsed.size(); ++l) {
    try {
      layers_.push_back(make_layer(parsed[l].name, parsed[l].args, at));
    } catch (const usage_error& e) {
      throw usage_error("model spec \"" + spec + "\": layer " +
                        std::to_string(l) + " (at character " +
                        std::to_string(parsed[l].at + 1) + "), " + e.what() +
                        (parsed[l].name == "linear" || parsed[l].name == "conv"
                           ? ""
                           : std::string{"; "} + layer_forms));
    }
    offsets_.push_back(params_);
    params_ += layers_.back()->num_params();
    at = layers_.back()->out();
  }
  if (at.size() < 2)
    throw usage_error("model spec \"" + spec + "\": the last layer gives " +
                      std::to_string(at.size()) +
                      " value an example; end with linear(K) for K classes");
}

sequential::~sequential() = default;
sequential::sequential(sequential&&) noexcept = default;

std::string sequential::name() const {
  return "sequential " + to_string(input_) + " " + spec_;
}

size_t sequential::num_params() const {
  return params_;
}

std::vector<float> sequential::init(uint64_t seed) const {
  std::vector<float> p(params_);
  std::mt19937_64 gen{seed};
  for (size_t l = 0; l < layers_.size(); ++l)
    layers_[l]->init(p.data() + offsets_[l], gen);
  return p;
}

std::vector<ml::param_range> sequential::layers() const {
  std::vector<ml::param_range> out;
  for (size_t l = 0; l < layers_.size(); ++l)
    if (auto n = layers_[l]->num_params(); n > 0)
      out.push_back({offsets_[l], offsets_[l] + n});
  return out;
}

size_t sequential::classes() const {
  return layers_.back()->out().size();
}

std::vector<sequential::tensor_range> sequential::tensors() const {
  std::vector<tensor_range> out;
  for (size_t l = 0; l < layers_.size(); ++l) {
    auto& y = *layers_[l];
    if (y.num_params() == 0)
      continue;
    auto at = offsets_[l], mid = at + y.num_weights();
    auto name = "layers." + std::to_string(l);
    out.push_back({name + ".weight", {at, mid}, y.weight_shape()});
    out.push_back(
      {name + ".bias", {mid, mid + y.num_biases()}, {int64_t(y.num_biases())}});
  }
  return out;
}

std::string sequential::summary() const {
  std::ostringstream out;
  out << "input " << to_string(input_) << "\n";
  for (size_t l = 0; l < layers_.size(); ++l)
    out << "layers." << l << " " << layers_[l]->spec() << " -> "
        << to_string(layers_[l]->out()) << ", " << layers_[l]->num_params()
        << " parameters\n";
  out << params_ << " parameters in all\n";
  return out.str();
}

float sequential::run(const float* params, const ml::dataset& batch,
                      float* grad, size_t* right,
                      const ml::gradient_ready* ready) const {
  ml::detail::check_batch(name(), batch, input_.size(), classes());
  // acts[l] is layer l's input, acts.back() the logits. Kept by each
  // thread from step to step: allocating a step's activations anew cost a
  // tenth of the step in page faults.
  thread_local std::vector<matrix> acts;
  thread_local matrix dy, dx;
  acts.resize(layers_.size() + 1);
  acts[0] = ml::detail::const_matrix_map{batch.features.data<float>(),
                                         idx(batch.size()), idx(input_.size())};
  for (size_t l = 0; l < layers_.size(); ++l)
    layers_[l]->forward(params + offsets_[l], acts[l], acts[l + 1]);
  dy = acts.back();
  auto loss = ml::detail::softmax_cross_entropy(
    dy, batch.labels.data<int32_t>(), right, grad != nullptr);
  if (grad == nullptr)
    return loss;
  // Back through the layers, the last first; a layer with parameters
  // tells `ready` (by its place among those) once its gradient is written.
  auto with_params = layers().size();
  for (size_t l = layers_.size(); l-- > 0;) {
    auto& y = *layers_[l];
    y.backward(params + offsets_[l], acts[l], acts[l + 1], dy,
               l > 0 ? &dx : nullptr, grad + offsets_[l]);
    if (y.num_params() > 0) {
      --with_params;
      if (ready != nullptr && *ready)
        (*ready)(with_params);
    }
    dy.swap(dx);
  }
  return loss;
}

float sequential::loss_and_gradient(const float* params,
                                    const ml::dataset& batch,
                                    float* grad) const {
  return run(params, batch, grad, nullptr, nullptr);
}

float sequential::loss_and_gradient(const float* params,
                                    const ml::dataset& batch, float* grad,
                                    const ml::gradient_ready& ready) const {
  return run(params, batch, grad, nullptr, &ready);
}

float sequential::evaluate(const float* params, const ml::dataset& batch,
                           size_t* right) const {
  // In slices: a test set's activations at once would take gigabytes.
  constexpr size_t slice = 256;
  if (batch.size() <= slice)
    return run(params, batch, nullptr, right, nullptr);
  double sum = 0;
  size_t all_right = 0;
  for (size_t at = 0; at < batch.size(); at += slice) {
    auto end = std::min(batch.size(), at + slice);
    size_t part_right = 0;
    ml::dataset part{batch.features.rows(at, end), batch.labels.rows(at, end)};
    sum += double(run(params, part, nullptr, &part_right, nullptr)) *
           double(end - at);
    all_right += part_right;
  }
  if (right != nullptr)
    *right = all_right;
  return float(sum / double(batch.size()));
}

float sequential::loss(const float* params, const ml::dataset& batch) const {
  return evaluate(params, batch, nullptr);
}

float sequential::accuracy(const float* params,
                           const ml::dataset& batch) const {
  size_t right = 0;
  evaluate(params, batch, &right);
  return static_cast<float>(right) / static_cast<float>(batch.size());
}

} // namespace lumen::nn
