#include "lumen/ml/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace lumen::ml {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

/// The element count of `shape` for elements of `type`; throws
/// `usage_error` for a negative dimension or more bytes than memory holds.
size_t count_elements(const std::vector<int64_t>& shape, dtype type) {
  size_t n = 1;
  for (auto d : shape) {
    if (d < 0)
      throw usage_error("a tensor dimension cannot be negative (got " +
                        std::to_string(d) + ")");
    auto dim = static_cast<size_t>(d);
    if (dim != 0 && n > SIZE_MAX / dim)
      throw usage_error("a tensor of shape " + shape_text(shape) +
                        " has more elements than memory can hold");
    n *= dim;
  }
  if (size_of(type) == 0)
    throw usage_error("a tensor needs a known dtype (float32, float64, "
                      "int32, int64)");
  if (n > SIZE_MAX / size_of(type))
    throw usage_error("a tensor of shape " + shape_text(shape) + " of " +
                      to_string(type) + " has more bytes than memory can hold");
  return n;
}

} // namespace

const char* to_string(dtype t) noexcept {
  switch (t) {
    case dtype::float32:
      return "float32";
    case dtype::float64:
      return "float64";
    case dtype::int32:
      return "int32";
    case dtype::int64:
      return "int64";
  }
  return "unknown";
}

size_t size_of(dtype t) noexcept {
  switch (t) {
    case dtype::float32:
    case dtype::int32:
      return 4;
    case dtype::float64:
    case dtype::int64:
      return 8;
  }
  return 0;
}

const char* tensor::cpp_name(dtype t) noexcept {
  switch (t) {
    case dtype::float32:
      return "float";
    case dtype::float64:
      return "double";
    case dtype::int32:
      return "int32_t";
    case dtype::int64:
      return "int64_t";
  }
  return "?";
}

tensor::tensor()
  : tensor(std::vector<int64_t>{0}) {}

tensor::tensor(std::vector<int64_t> shape, dtype type)
  : tensor(std::move(shape), type, nullptr) {
  storage_ = std::make_shared<std::vector<char>>(nbytes());
}

tensor::tensor(std::vector<int64_t> shape, dtype type,
               std::shared_ptr<std::vector<char>> storage)
  : type_(type)
  , shape_(std::move(shape))
  , numel_(count_elements(shape_, type))
  , storage_(std::move(storage)) {}

tensor tensor::copy_of(std::vector<int64_t> shape, dtype type,
                       const char* data) {
  tensor t{std::move(shape), type, nullptr};
  t.storage_ = std::make_shared<std::vector<char>>(data, data + t.nbytes());
  return t;
}

tensor tensor::cat(const std::vector<tensor>& parts) {
  if (parts.empty())
    throw usage_error("cat of no tensors; give it one at least");
  auto& first = parts.front();
  if (first.shape_.empty())
    throw usage_error("cat joins along the first dimension; a " +
                      first.describe() + " tensor has none");
  auto shape = first.shape_;
  shape[0] = 0;
  for (auto& p : parts) {
    if (p.type_ != first.type_ || p.shape_.size() != shape.size() ||
        !std::equal(shape.begin() + 1, shape.end(), p.shape_.begin() + 1))
      throw usage_error("cat of a " + p.describe() + " tensor after a " +
                        first.describe() +
                        " one: parts may differ in their first dimension "
                        "only");
    shape[0] += p.shape_[0];
  }
  tensor t{std::move(shape), first.type_,
           std::make_shared<std::vector<char>>()};
  t.storage_->reserve(t.nbytes());
  for (auto& p : parts)
    t.storage_->insert(t.storage_->end(), p.raw_begin(),
                       p.raw_begin() + p.nbytes());
  return t;
}

tensor tensor::clone() const {
  tensor t = *this;
  t.own();
  return t;
}

void tensor::own() {
  auto p = raw_begin();
  storage_ = std::make_shared<std::vector<char>>(p, p + nbytes());
  view_ = nullptr;
  owner_.reset();
}

tensor tensor::view(std::vector<int64_t> shape, dtype type, const char* data,
                    std::shared_ptr<const void> owner) {
  tensor t{std::move(shape), type, nullptr};
  t.view_ = data;
  t.owner_ = std::move(owner);
  return t;
}

tensor tensor::rows(size_t begin, size_t end) const {
  if (shape_.empty() || begin > end || end > static_cast<size_t>(shape_[0]))
    throw usage_error("rows [" + std::to_string(begin) + ", " +
                      std::to_string(end) + ") of a " + describe() +
                      " tensor are out of range");
  auto shape = shape_;
  shape[0] = static_cast<int64_t>(end - begin);
  size_t row_bytes = shape_[0] == 0 ? 0 : nbytes() / shape_[0];
  std::shared_ptr<const void> owner = owner_;
  if (view_ == nullptr)
    owner = storage_;
  return view(std::move(shape), type_, raw_begin() + begin * row_bytes,
              std::move(owner));
}

bool operator==(const tensor& a, const tensor& b) {
  // memcmp takes no null pointers, which empty storage may give.
  return a.type_ == b.type_ && a.shape_ == b.shape_ &&
         (a.nbytes() == 0 ||
          std::memcmp(a.raw_begin(), b.raw_begin(), a.nbytes()) == 0);
}

std::string tensor::describe() const {
  return std::string{to_string(type_)} + shape_text(shape_);
}

void tensor::require_rank(size_t rank) const {
  if (shape_.size() != rank)
    throw usage_error("this needs a tensor of " + std::to_string(rank) +
                      " dimensions; this one is " + describe());
}

std::vector<char>& tensor::fresh_storage() {
  numel_ = 0; // until check_loaded agrees with what was read
  view_ = nullptr;
  owner_.reset();
  storage_ = std::make_shared<std::vector<char>>();
  return *storage_;
}

std::string tensor::bytes_for_shape(size_t& bytes) const {
  if (static_cast<uint8_t>(type_) > static_cast<uint8_t>(dtype::int64))
    return "a tensor with an unknown dtype";
  try {
    bytes = count_elements(shape_, type_) * size_of(type_);
  } catch (const usage_error& e) {
    return e.what();
  }
  return {};
}

std::string tensor::check_loaded() {
  size_t want = 0;
  if (auto why = bytes_for_shape(want); !why.empty())
    return why;
  if (view_ == nullptr && want != storage_->size())
    return "a " + describe() + " tensor needs " + std::to_string(want) +
           " bytes, got " + std::to_string(storage_->size());
  numel_ = want / size_of(type_);
  return {};
}

size_t first_non_finite(const float* v, size_t n) noexcept {
  constexpr size_t block = 1024;
  constexpr uint32_t exponent = 0x7f800000; // all ones: NaN or infinity
  for (size_t at = 0; at < n; at += block) {
    size_t end = std::min(n, at + block);
    uint32_t bad = 0;
    for (size_t i = at; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, v + i, sizeof(bits));
      bad |= static_cast<uint32_t>((bits & exponent) == exponent);
    }
    if (bad != 0)
      for (size_t i = at; i < end; ++i)
        if (!std::isfinite(v[i]))
          return i;
  }
  return n;
}

} // namespace lumen::ml
