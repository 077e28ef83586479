#include "lumen/nn/sequential.hpp"

#include <algorithm>
#include <sstream>

#include "lumen/errors.hpp"

#include "nn/layers.hpp"
#include "nn/spec.hpp"

namespace lumen::nn {

namespace {

/// acts[l] is layer l's input, acts.back() the logits. Kept by each thread
/// from step to step: allocating a step's activations anew cost a tenth of
/// the step in page faults.
std::vector<matrix>& activations() {
  thread_local std::vector<matrix> acts;
  return acts;
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
  // ReLU before max pooling runs after it: the same numbers forward and
  // back (a window's largest input is positive exactly when its largest
  // ReLU is, and is then the same input), on a quarter of the values.
  for (size_t l = 0; l + 1 < parsed.size(); ++l)
    if (parsed[l].name == "relu" && parsed[l + 1].name == "pool")
      std::swap(parsed[l], parsed[l + 1]);
  std::vector<size_t> open; // the unclosed res( layers
  for (size_t l = 0; l < parsed.size(); ++l) {
    auto fail = [&](const std::string& what, bool forms) {
      return usage_error("model spec \"" + spec + "\": layer " +
                         std::to_string(parsed[l].place) + " (at character " +
                         std::to_string(parsed[l].at + 1) + "), " + what +
                         (forms ? std::string{"; "} + layer_forms : ""));
    };
    auto& name = parsed[l].name;
    try {
      auto made = make_layer(name, parsed[l].args, at);
      if (!made)
        made = make_image_layer(name, parsed[l].args, at);
      if (!made)
        made = make_sequence_layer(name, parsed[l].args, at);
      if (!made)
        throw fail("an unknown layer '" + name + "'", true);
      layers_.push_back(std::move(made));
    } catch (const usage_error& e) {
      if (std::string{e.what()}.rfind("model spec", 0) == 0)
        throw;
      throw fail(e.what(), name != "linear" && name != "conv");
    }
    skip_from_.push_back(-1);
    opens_residual_.push_back(name == "res");
    if (name == "res") {
      open.push_back(l);
    } else if (name == ")") {
      auto from = open.back();
      open.pop_back();
      if (!(layers_[from]->in() == at))
        throw fail("the layers of the res( at character " +
                     std::to_string(parsed[from].at + 1) + " turn " +
                     to_string(layers_[from]->in()) + " into " + to_string(at) +
                     "; a residual adds its input to its output, of one "
                     "shape",
                   false);
      skip_from_.back() = long(from);
    }
    offsets_.push_back(params_);
    params_ += layers_.back()->num_params();
    param_layers_ += layers_.back()->num_params() > 0;
    at = layers_.back()->out();
  }
  positions_ = std::max<size_t>(1, layers_.front()->positions());
  if (at.size() / positions_ < 2)
    throw usage_error("model spec \"" + spec + "\": the last layer gives " +
                      std::to_string(at.size() / positions_) + " value a" +
                      (positions_ > 1 ? " position" : "n example") +
                      "; end with linear(K) for K classes (dense(K) at each "
                      "position of a sequence)");
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
  return layers_.back()->out().size() / positions_;
}

size_t sequential::positions() const {
  return positions_;
}

std::vector<sequential::tensor_range> sequential::tensors() const {
  std::vector<tensor_range> out;
  for (size_t l = 0; l < layers_.size(); ++l) {
    auto at = offsets_[l];
    for (auto& part : layers_[l]->tensors()) {
      size_t n = 1;
      for (auto d : part.shape)
        n *= size_t(d);
      out.push_back({"layers." + std::to_string(l) + "." + part.name,
                     {at, at + n},
                     part.shape});
      at += n;
    }
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

void sequential::forward(const float* params, const float* features,
                         size_t rows) const {
  auto& acts = activations();
  acts.resize(layers_.size() + 1);
  acts[0] =
    ml::detail::const_matrix_map{features, idx(rows), idx(input_.size())};
  for (size_t l = 0; l < layers_.size(); ++l) {
    layers_[l]->forward(params + offsets_[l], acts[l], acts[l + 1]);
    if (skip_from_[l] >= 0)
      acts[l + 1] += acts[size_t(skip_from_[l])];
  }
}

std::vector<float> sequential::outputs(const float* params,
                                       const ml::tensor& features) const {
  if (features.type() != ml::dtype::float32 || features.shape().size() != 2 ||
      size_t(features.shape()[1]) != input_.size())
    throw usage_error(name() + " takes float32 rows of " +
                      std::to_string(input_.size()) +
                      " values; the features are " + features.describe());
  forward(params, features.data<float>(), size_t(features.shape()[0]));
  auto& logits = activations().back();
  return {logits.data(), logits.data() + logits.size()};
}

float sequential::run(const float* params, const ml::dataset& batch,
                      float* grad, size_t* right,
                      const ml::gradient_ready* ready) const {
  ml::detail::check_batch(name(), batch, input_.size(), classes(), positions_);
  training_scope pass{grad != nullptr};
  forward(params, batch.features.data<float>(), batch.size());
  auto& acts = activations();
  thread_local std::vector<matrix> skip;
  thread_local matrix dy, dx;
  // A row of logits an example and position.
  auto rows = idx(batch.size() * positions_);
  dy = ml::detail::const_matrix_map{acts.back().data(), rows, idx(classes())};
  auto loss = ml::detail::softmax_cross_entropy(
    dy, batch.labels.data<int32_t>(), right, grad != nullptr);
  if (grad == nullptr)
    return loss;
  dx = ml::detail::const_matrix_map{dy.data(), idx(batch.size()),
                                    acts.back().cols()};
  dy.swap(dx);
  // Back through the layers, the last first; a layer with parameters
  // tells `ready` (by its place among those) once its gradient is written.
  // A residual's ")" hands its gradient to its "res(" too.
  skip.resize(layers_.size());
  auto with_params = param_layers_;
  for (size_t l = layers_.size(); l-- > 0;) {
    auto& y = *layers_[l];
    if (skip_from_[l] >= 0)
      skip[size_t(skip_from_[l])] = dy;
    y.backward(params + offsets_[l], acts[l], acts[l + 1], dy,
               l > 0 ? &dx : nullptr, grad + offsets_[l]);
    if (l > 0 && opens_residual_[l])
      dx += skip[l];
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
  // At most 256 examples, and 4096 rows of positions: a text's 192
  // windows of 256 in one slice took 4.7 GB a worker (every layer's
  // activations, attention's queries, keys and values).
  constexpr size_t examples = 256, rows = 4096;
  auto slice = std::max<size_t>(1, std::min(examples, rows / positions_));
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
  return static_cast<float>(right) /
         static_cast<float>(batch.size() * positions_);
}

} // namespace lumen::nn
