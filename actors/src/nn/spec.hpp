#pragma once

// A model spec's language ("conv(32,3)-relu-pool(2)-...", "res(...)"): its
// layers as written, for sequential to build, and what each kind computes,
// for a checkpoint's "forward".

#include <cstddef>
#include <string>
#include <vector>

namespace lumen::nn {

/// The forms a layer may take, for errors that point at a spec.
extern const char* const layer_forms;

/// A spec's layers: each name, its arguments, where it starts. A residual
/// "res(a-b)" is the layers "res", a, b, ")".
struct parsed_layer {
  std::string name;
  std::vector<size_t> args;
  size_t at = 0;
  size_t place = 0; // in the spec's order
};

/// `spec`'s layers in order; throws `usage_error` naming the character
/// where it stops making sense and the forms a layer may take.
std::vector<parsed_layer> parse(const std::string& spec);

} // namespace lumen::nn
