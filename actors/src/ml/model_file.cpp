#include "lumen/ml/model_file.hpp"

#include <cstring>
#include <sstream>

#include "lumen/ml/safetensors.hpp"

namespace lumen::ml {

namespace {

constexpr const char* kind_key = "lumen.model";
constexpr const char* architecture_key = "architecture";
constexpr const char* forward_key = "forward";

/// The widths of the model's layers: input, hidden..., output.
std::vector<uint64_t> widths_of(const model_spec& spec) {
  std::vector<uint64_t> w{spec.dim};
  if (spec.kind == "linear_regression")
    return {spec.dim, 1};
  w.insert(w.end(), spec.hidden.begin(), spec.hidden.end());
  w.push_back(spec.classes);
  return w;
}

std::string layer_name(size_t i, const char* part) {
  return "layers." + std::to_string(i) + "." + part;
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
  auto widths = widths_of(f.spec);
  std::string architecture;
  size_t at = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    auto in = int64_t(widths[i]), width = int64_t(widths[i + 1]);
    tensor w{{in, width}}, b{{width}};
    std::memcpy(w.raw(), f.params.data() + at, w.nbytes());
    at += w.numel();
    std::memcpy(b.raw(), f.params.data() + at, b.nbytes());
    at += b.numel();
    out.tensors[layer_name(i, "weight")] = w;
    out.tensors[layer_name(i, "bias")] = b;
  }
  for (auto w : widths)
    architecture += (architecture.empty() ? "" : "-") + std::to_string(w);
  out.metadata[kind_key] = f.spec.kind;
  out.metadata[architecture_key] = architecture;
  out.metadata[forward_key] =
    f.spec.kind == "linear_regression"
      ? "y = x @ layers.0.weight + layers.0.bias"
      : "h = relu(h @ layers.i.weight + layers.i.bias) for each layer but the "
        "last; probabilities = softmax(h @ weight + bias) of the last";
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
  std::vector<uint64_t> widths;
  std::stringstream text{arch->second};
  for (std::string part; std::getline(text, part, '-');) {
    try {
      size_t used = 0;
      widths.push_back(std::stoull(part, &used));
      if (used != part.size() || widths.back() == 0)
        throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw fail("the architecture \"" + arch->second +
                 "\" is not widths joined by '-'");
    }
  }
  if (widths.size() < 2)
    throw fail("the architecture \"" + arch->second + "\" has no layer");
  model_file f;
  f.spec.kind = kind->second;
  f.spec.dim = widths.front();
  f.spec.classes = widths.back();
  f.spec.hidden.assign(widths.begin() + 1, widths.end() - 1);
  try {
    f.params.resize(make_model(f.spec)->num_params());
  } catch (const usage_error& e) {
    throw fail(e.what());
  }
  if (widths_of(f.spec) != widths)
    throw fail("a " + f.spec.kind + " of architecture " + arch->second);
  size_t at = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    for (auto [part, shape] :
         {std::pair{"weight", std::vector<int64_t>{int64_t(widths[i]),
                                                   int64_t(widths[i + 1])}},
          std::pair{"bias", std::vector<int64_t>{int64_t(widths[i + 1])}}}) {
      auto name = layer_name(i, part);
      auto t = in.tensors.find(name);
      if (t == in.tensors.end())
        throw fail("no tensor " + name);
      if (t->second.type() != dtype::float32 || t->second.shape() != shape)
        throw fail(name + " is " + t->second.describe() + " where the " +
                   arch->second + " architecture needs " +
                   tensor{shape}.describe());
      check_finite(path, name, t->second);
      std::memcpy(f.params.data() + at, t->second.raw(), t->second.nbytes());
      at += t->second.numel();
      in.tensors.erase(t);
    }
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
