#pragma once

// Gradient compression for the wire between workers and servers: fp16
// (half the bytes), and int8 with one scale per block of values (about a
// quarter), with error feedback that carries each step's quantization
// error into the next so that nothing is lost for good.
//
//   lumen::ml::error_feedback ef;
//   auto wire = ef.encode(grad.data(), grad.size(), codec::int8);
//   std::vector<float> back(grad.size());
//   lumen::ml::decompress(wire, back.data(), back.size());
//
// The codecs are plain C++ (tests, exercises and the browser playground
// use them alike); their wire format is in lumen/ml/wire.hpp.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lumen/ml/codec.hpp"
#include "lumen/ml/tensor.hpp"

namespace lumen::ml {

/// A compressed gradient: `numel` values in `bytes`. none: the floats;
/// fp16: two bytes a value (IEEE half, rounded to nearest even); int8:
/// the blocks' float scales (max |x| / 127), then one signed byte a value.
struct compressed {
  codec kind = codec::none;
  uint64_t numel = 0;
  std::vector<uint8_t> bytes;
};

/// Compresses `n` values. Throws `usage_error` for a NaN or infinite
/// value, and, for fp16, a value beyond its range (|x| > 65504: clip the
/// gradients, or use int8).
compressed compress(const float* values, size_t n, codec c);

/// Writes the `n` values of `in` to `out`. Throws `usage_error` if `n` is
/// not its count or its bytes do not fit its codec (a damaged message).
void decompress(const compressed& in, float* out, size_t n);

/// int8 (or fp16) with error feedback: each encode adds what the last
/// one lost (value − its decompressed value) before compressing, and
/// keeps the new loss. Over steps the sum of what was sent tracks the sum
/// of the gradients to within one step's error.
class error_feedback {
public:
  compressed encode(const float* values, size_t n, codec c);

  /// What the last encode lost, value by value.
  const std::vector<float>& residual() const noexcept {
    return residual_;
  }

private:
  std::vector<float> residual_;
  std::vector<float> carried_;
};

} // namespace lumen::ml
