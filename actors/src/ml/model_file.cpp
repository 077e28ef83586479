#include "lumen/ml/model_file.hpp"

#include <cstring>
#include <sstream>

#include "lumen/ml/safetensors.hpp"
#include "lumen/nn/sequential.hpp"

namespace lumen::ml {

namespace {

constexpr const char* kind_key = "lumen.model";
constexpr const char* architecture_key = "architecture";
constexpr const char* input_key = "lumen.input";
constexpr const char* forward_key = "forward";

using tensor_range = nn::sequential::tensor_range;

/// The widths of a dense model's layers: input, hidden..., output.
std::vector<uint64_t> widths_of(const model_spec& spec) {
  std::vector<uint64_t> w{spec.dim};
  if (spec.kind == "linear_regression")
    return {spec.dim, 1};
  w.insert(w.end(), spec.hidden.begin(), spec.hidden.end());
  w.push_back(spec.classes);
  return w;
}

/// The tensors of `net`, the model `spec` builds, named by layer, in the
/// flat vector's order.
std::vector<tensor_range> tensors_of(const model_spec& spec, const model& net) {
  if (spec.kind == "sequential")
    return static_cast<const nn::sequential&>(net).tensors();
  std::vector<tensor_range> out;
  auto widths = widths_of(spec);
  size_t at = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    auto in = size_t(widths[i]), width = size_t(widths[i + 1]);
    auto name = "layers." + std::to_string(i);
    out.push_back(
      {name + ".weight", {at, at + in * width}, {int64_t(in), int64_t(width)}});
    at += in * width;
    out.push_back({name + ".bias", {at, at + width}, {int64_t(width)}});
    at += width;
  }
  return out;
}

std::string architecture_of(const model_spec& spec) {
  if (spec.kind == "sequential")
    return spec.layers;
  std::string out;
  for (auto w : widths_of(spec))
    out += (out.empty() ? "" : "-") + std::to_string(w);
  return out;
}

std::string forward_of(const model_spec& spec) {
  if (spec.kind == "linear_regression")
    return "y = x @ layers.0.weight + layers.0.bias";
  if (spec.kind == "sequential")
    return "the layers of 'architecture' in order, joined by '-', on an input "
           "of lumen.input (channels x height x width, row-major), " +
           nn::describe_layers(spec.layers) +
           ". Probabilities = softmax of the last layer's outputs (at each "
           "position, after embed)";
  return "h = relu(h @ layers.i.weight + layers.i.bias) for each layer but the "
         "last; probabilities = softmax(h @ weight + bias) of the last";
}

safetensors_file to_safetensors(const model_file& f) {
  auto net = make_model(f.spec);
  if (f.params.size() != net->num_params())
    throw usage_error("save_model_file: " + std::to_string(f.params.size()) +
                      " parameters for " + net->name() + ", which has " +
                      std::to_string(net->num_params()));
  safetensors_file out;
  out.metadata = f.metadata;
  for (auto& [name, t] : f.extra) {
    if (name.rfind("layers.", 0) == 0)
      throw usage_error("save_model_file: an extra tensor named '" + name +
                        "'; layers.* are the model's own");
    out.tensors[name] = t;
  }
  for (auto& part : tensors_of(f.spec, *net)) {
    tensor t{part.shape};
    std::memcpy(t.raw(), f.params.data() + part.range.begin, t.nbytes());
    out.tensors[part.name] = std::move(t);
  }
  out.metadata[kind_key] = f.spec.kind;
  out.metadata[architecture_key] = architecture_of(f.spec);
  if (f.spec.kind == "sequential")
    out.metadata[input_key] = std::to_string(f.spec.input[0]) + "x" +
                              std::to_string(f.spec.input[1]) + "x" +
                              std::to_string(f.spec.input[2]);
  out.metadata[forward_key] = forward_of(f.spec);
  return out;
}

/// Positive numbers joined by `sep`, or nothing if the text is not.
std::vector<uint64_t> sizes_in(const std::string& text, char sep) {
  std::vector<uint64_t> out;
  std::stringstream in{text};
  for (std::string part; std::getline(in, part, sep);) {
    try {
      size_t used = 0;
      out.push_back(std::stoull(part, &used));
      if (used != part.size() || out.back() == 0)
        return {};
    } catch (const std::exception&) {
      return {};
    }
  }
  return out;
}

/// Refuses a tensor holding NaN or infinity: a model that a run diverged
/// into, or damage a checksum could not see.
void check_finite(const std::string& path, const std::string& name,
                  const tensor& t) {
  if (t.type() != dtype::float32)
    return;
  auto at = first_non_finite(t.data<float>(), t.numel());
  if (at < t.numel())
    throw data_error(path + ": tensor " + name + " holds " +
                       std::to_string(t.data<float>()[at]) + " at element " +
                       std::to_string(at) +
                       "; a model's numbers are finite (did the run that "
                       "wrote it diverge?): take another checkpoint",
                     errc::bad_file);
}

model_file from_safetensors(safetensors_file in, const std::string& path) {
  auto fail = [&](const std::string& why) -> data_error {
    return data_error(
      path + ": " + why +
        "; it is not a model file Lumen wrote (save_model_file)",
      errc::bad_file);
  };
  auto kind = in.metadata.find(kind_key);
  auto arch = in.metadata.find(architecture_key);
  if (kind == in.metadata.end() || arch == in.metadata.end())
    throw fail(std::string{"no \""} + kind_key + "\" or \"" + architecture_key +
               "\" in its metadata");
  model_file f;
  f.spec.kind = kind->second;
  if (f.spec.kind == "sequential") {
    auto input = in.metadata.find(input_key);
    auto sizes = input == in.metadata.end() ? std::vector<uint64_t>{}
                                            : sizes_in(input->second, 'x');
    if (sizes.size() != 3)
      throw fail(std::string{"no \""} + input_key +
                 "\" of channels x height x width in its metadata");
    f.spec.input = sizes;
    f.spec.dim = sizes[0] * sizes[1] * sizes[2];
    f.spec.layers = arch->second;
  } else {
    auto widths = sizes_in(arch->second, '-');
    if (widths.empty())
      throw fail("the architecture \"" + arch->second +
                 "\" is not widths joined by '-'");
    if (widths.size() < 2)
      throw fail("the architecture \"" + arch->second + "\" has no layer");
    f.spec.dim = widths.front();
    f.spec.classes = widths.back();
    f.spec.hidden.assign(widths.begin() + 1, widths.end() - 1);
    if (widths_of(f.spec) != widths)
      throw fail("a " + f.spec.kind + " of architecture " + arch->second);
  }
  std::vector<tensor_range> parts;
  try {
    auto net = make_model(f.spec);
    if (f.spec.kind == "sequential")
      f.spec.classes = static_cast<nn::sequential&>(*net).classes();
    f.params.resize(net->num_params());
    parts = tensors_of(f.spec, *net);
  } catch (const usage_error& e) {
    throw fail(e.what());
  }
  // A softmax_regression has no hidden layers to read.
  if (parts.empty() || parts.back().range.end != f.params.size())
    throw fail("a " + f.spec.kind + " of architecture " + arch->second);
  for (auto& part : parts) {
    auto t = in.tensors.find(part.name);
    if (t == in.tensors.end())
      throw fail("no tensor " + part.name);
    if (t->second.type() != dtype::float32 || t->second.shape() != part.shape)
      throw fail(part.name + " is " + t->second.describe() + " where the " +
                 arch->second + " architecture needs " +
                 tensor{part.shape}.describe());
    check_finite(path, part.name, t->second);
    std::memcpy(f.params.data() + part.range.begin, t->second.raw(),
                t->second.nbytes());
    in.tensors.erase(t);
  }
  for (auto& [name, t] : in.tensors) {
    if (name.rfind("layers.", 0) == 0)
      throw fail("a tensor " + name + " beyond the " + arch->second +
                 " architecture's layers");
    check_finite(path, name, t);
    f.extra[name] = t;
  }
  in.metadata.erase(kind_key);
  in.metadata.erase(architecture_key);
  in.metadata.erase(input_key);
  in.metadata.erase(forward_key);
  f.metadata = std::move(in.metadata);
  return f;
}

} // namespace

void save_model_file(const std::string& path, const model_file& f) {
  save_safetensors(path, to_safetensors(f));
}

model_file load_model_file(const std::string& path) {
  return from_safetensors(load_safetensors(path), path);
}

std::vector<char> model_file_bytes(const model_file& f) {
  return safetensors_bytes(to_safetensors(f));
}

model_file parse_model_file(const std::vector<char>& bytes,
                            const std::string& name) {
  return from_safetensors(parse_safetensors(bytes, name), name);
}

} // namespace lumen::ml
