#pragma once

// A trained model in one safetensors file that a reader rebuilds and runs
// from the file alone, with numpy or PyTorch and no Lumen:
//
//   tensors   layers.<i>.weight  float32 [in, out]
//             layers.<i>.bias    float32 [out]
//   metadata  "lumen.model"   "mlp" (or "softmax_regression",
//                             "linear_regression")
//             "architecture"  "784-256-128-10": the layers' widths
//             "forward"       how the layers compose: y = x @ weight + bias,
//                             ReLU between layers, softmax after the last
//                             (none for linear_regression)
//             and what the caller adds (the input's normalisation, epochs).
//
//   lumen::ml::model_file f{spec, params};
//   f.metadata["input_mean"] = "0.2860";
//   lumen::ml::save_model_file("model.safetensors", f);
//   auto back = lumen::ml::load_model_file("model.safetensors");
//   auto net = lumen::ml::make_model(back.spec);
//   net->accuracy(back.params.data(), test);
//
// No CAF here: tests, exercises and the browser playground use it alike.

#include <map>
#include <string>
#include <vector>

#include "lumen/ml/models.hpp"
#include "lumen/ml/tensor.hpp"

namespace lumen::ml {

struct model_file {
  model_spec spec;
  std::vector<float> params; // the model's flat vector (make_model(spec))
  // More tensors to keep with it (an optimizer's state), under names
  // other than layers.*.
  std::map<std::string, tensor> extra;
  // The caller's metadata; the model's own keys are added on save and
  // read back into `spec` on load.
  std::map<std::string, std::string> metadata;
};

/// Writes `f` as safetensors (atomically, as save_safetensors). Throws
/// `usage_error` if `params` does not fit `spec` or an extra tensor is
/// named layers.*, `data_error` if the file cannot be written.
void save_model_file(const std::string& path, const model_file& f);

/// Reads a file save_model_file wrote. Throws `data_error` naming the
/// file and the problem: not safetensors, no "lumen.model" or
/// "architecture", a layer missing or of the wrong shape or dtype.
model_file load_model_file(const std::string& path);

/// The same as bytes in memory (a train::checkpoint's files), errors
/// naming the file `name`.
std::vector<char> model_file_bytes(const model_file& f);
model_file parse_model_file(const std::vector<char>& bytes,
                            const std::string& name);

} // namespace lumen::ml
