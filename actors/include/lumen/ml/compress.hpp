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
// use them alike); only the wire format below names CAF's inspectors.

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <caf/deserializer.hpp>
#include <caf/meta/type_name.hpp>

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

namespace detail {

/// The byte block of a `compressed` as CAF reads it.
struct compressed_bytes {
  compressed* c;

  friend caf::error inspect(caf::deserializer& f, compressed_bytes& x) {
    return detail::load_exact_bytes(f, x.c->bytes,
                                    compressed_size(x.c->kind, x.c->numel),
                                    std::string{"a compressed gradient of "} +
                                      std::to_string(x.c->numel) + " values");
  }
};

} // namespace detail

/// A gradient on the wire: the bytes as one raw block, of the length its
/// codec and count say (a peer's other length is refused unread).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, compressed& x) {
  auto name = caf::meta::type_name("lumen::ml::compressed");
  if constexpr (std::is_same<Inspector, caf::deserializer>::value) {
    detail::compressed_bytes bytes{&x};
    return f(name, x.kind, x.numel, bytes);
  } else {
    return f(name, x.kind, x.numel, x.bytes);
  }
}

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
