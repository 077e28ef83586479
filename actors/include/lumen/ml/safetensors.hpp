#pragma once

// Checkpoints as safetensors files: an 8-byte little-endian header
// length, a JSON header naming each tensor's dtype, shape and byte range,
// then the tensors' raw little-endian bytes. numpy, PyTorch
// (safetensors.torch.load_file) and Hugging Face's tools read them.
//
//   lumen::ml::save_safetensors("ckpt.safetensors",
//                               {{"weights", w}}, {{"version", "42"}});
//   auto file = lumen::ml::load_safetensors("ckpt.safetensors");
//   file.tensors.at("weights"), file.metadata.at("version")
//
// No CAF here: tests, exercises and the browser playground use it alike.

#include <map>
#include <string>
#include <vector>

#include "lumen/ml/data.hpp"
#include "lumen/ml/tensor.hpp"

namespace lumen::ml {

struct safetensors_file {
  std::map<std::string, tensor> tensors;
  std::map<std::string, std::string> metadata; // "__metadata__"
};

/// The file's bytes, as save_safetensors writes them.
std::vector<char> safetensors_bytes(const safetensors_file& file);

/// Writes `file` to `path` (through a temporary file renamed over it, so
/// that a crash never leaves half a checkpoint). Throws `data_error`
/// naming the path if it cannot be written.
void save_safetensors(const std::string& path, const safetensors_file& file);

/// Reads a safetensors file. Throws `data_error` naming the file and the
/// problem for one that is missing, truncated, has a malformed header, an
/// unknown dtype, or byte ranges that overlap, leave gaps or do not fit
/// their shapes.
safetensors_file load_safetensors(const std::string& path);

/// Reads the bytes of a safetensors file, as load_safetensors does; errors
/// name the file `name`.
safetensors_file parse_safetensors(const std::vector<char>& bytes,
                                   const std::string& name);

} // namespace lumen::ml
