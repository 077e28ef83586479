#include "lumen/ml/compress.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include <Eigen/Core>

#include <lumen/errors.hpp>

namespace lumen::ml {

namespace {

constexpr float fp16_max = 65504.0f;

size_t blocks_of(size_t n) {
  return (n + int8_block - 1) / int8_block;
}

void check_finite(const float* v, size_t n, codec c) {
  if (auto i = first_non_finite(v, n); i < n)
    throw usage_error(std::string{"cannot compress value "} +
                      std::to_string(i) + " (" + std::to_string(v[i]) +
                      ") to " + to_string(c) +
                      ": a gradient must be finite; look for a diverging "
                      "loss or clip the gradients");
  for (size_t i = 0; i < n && c == codec::fp16; ++i) {
    if (std::abs(v[i]) > fp16_max)
      throw usage_error("cannot compress value " + std::to_string(i) + " (" +
                        std::to_string(v[i]) +
                        ") to fp16, whose largest is 65504; clip the "
                        "gradients, or use int8");
  }
}

void check_codec(codec c) {
  if (c != codec::none && c != codec::fp16 && c != codec::int8)
    throw usage_error("codec " + std::to_string(static_cast<int>(c)) +
                      " is none of none, fp16 and int8; the message is "
                      "damaged");
}

} // namespace

const char* to_string(codec c) noexcept {
  switch (c) {
    case codec::none:
      return "none";
    case codec::fp16:
      return "fp16";
    case codec::int8:
      return "int8";
  }
  return "unknown";
}

size_t compressed_size(codec c, size_t numel) noexcept {
  switch (c) {
    case codec::none:
      return numel * sizeof(float);
    case codec::fp16:
      return numel * sizeof(Eigen::half);
    case codec::int8:
      return blocks_of(numel) * sizeof(float) + numel;
  }
  return 0;
}

compressed compress(const float* v, size_t n, codec c) {
  check_codec(c);
  check_finite(v, n, c);
  compressed out;
  out.kind = c;
  out.numel = n;
  out.bytes.resize(compressed_size(c, n));
  auto at = out.bytes.data();
  if (c == codec::none) {
    if (n > 0)
      std::memcpy(at, v, n * sizeof(float));
  } else if (c == codec::fp16) {
    for (size_t i = 0; i < n; ++i) {
      Eigen::half h{v[i]};
      std::memcpy(at + 2 * i, &h, 2);
    }
  } else {
    auto scales = at;
    auto q = reinterpret_cast<int8_t*>(at + blocks_of(n) * sizeof(float));
    for (size_t b = 0; b < blocks_of(n); ++b) {
      auto begin = b * int8_block, end = std::min(n, begin + int8_block);
      float top = 0;
      for (size_t i = begin; i < end; ++i)
        top = std::max(top, std::abs(v[i]));
      float scale = top / 127.0f;
      std::memcpy(scales + b * sizeof(float), &scale, sizeof(float));
      for (size_t i = begin; i < end; ++i)
        q[i] = scale == 0 ? 0
                          : static_cast<int8_t>(std::lround(
                              std::clamp(v[i] / scale, -127.0f, 127.0f)));
    }
  }
  return out;
}

void decompress(const compressed& in, float* out, size_t n) {
  check_codec(in.kind);
  if (in.numel != n)
    throw usage_error("decompress: the message holds " +
                      std::to_string(in.numel) + " values, the buffer " +
                      std::to_string(n) + "; sizes must match");
  if (in.bytes.size() != compressed_size(in.kind, n))
    throw usage_error(
      std::string{"decompress: "} + std::to_string(in.bytes.size()) +
      " bytes for " + std::to_string(n) + " values in " + to_string(in.kind) +
      ", which takes " + std::to_string(compressed_size(in.kind, n)) +
      "; the message is damaged");
  auto at = in.bytes.data();
  if (in.kind == codec::none) {
    if (n > 0)
      std::memcpy(out, at, n * sizeof(float));
  } else if (in.kind == codec::fp16) {
    for (size_t i = 0; i < n; ++i) {
      Eigen::half h;
      std::memcpy(&h, at + 2 * i, 2);
      out[i] = static_cast<float>(h);
    }
  } else {
    auto q = reinterpret_cast<const int8_t*>(at + blocks_of(n) * sizeof(float));
    for (size_t b = 0; b < blocks_of(n); ++b) {
      float scale;
      std::memcpy(&scale, at + b * sizeof(float), sizeof(float));
      if (!std::isfinite(scale))
        throw usage_error("decompress: block " + std::to_string(b) +
                          " has a scale of " + std::to_string(scale) +
                          "; the message is damaged");
      auto begin = b * int8_block, end = std::min(n, begin + int8_block);
      for (size_t i = begin; i < end; ++i)
        out[i] = q[i] * scale;
    }
  }
}

compressed error_feedback::encode(const float* v, size_t n, codec c) {
  if (residual_.size() != n)
    residual_.assign(n, 0.0f); // a new size starts afresh
  carried_.resize(n);
  for (size_t i = 0; i < n; ++i)
    carried_[i] = v[i] + residual_[i];
  auto out = compress(carried_.data(), n, c);
  decompress(out, residual_.data(), n);
  for (size_t i = 0; i < n; ++i)
    residual_[i] = carried_[i] - residual_[i];
  return out;
}

} // namespace lumen::ml
