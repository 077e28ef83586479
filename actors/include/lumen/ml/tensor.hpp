#pragma once

// lumen::ml::tensor: a shaped block of numbers, as PyTorch users know it.
// Copies of a tensor share its storage (as `b = a` does in PyTorch);
// `clone()` copies the numbers. It crosses processes as one block of raw
// bytes, and Eigen maps it in place. A tensor may also view numbers it
// does not own (rows of another tensor, a node's shared memory): reading
// reads them in place, and the first write through it makes it a copy of
// its own, so that a view never writes into what others read.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include <lumen/errors.hpp>

namespace lumen::ml {

enum class dtype : uint8_t { float32, float64, int32, int64 };

/// "float32", ...
const char* to_string(dtype t) noexcept;

/// Bytes per element.
size_t size_of(dtype t) noexcept;

/// The dtype of element type `T` (float, double, int32_t, int64_t).
template <class T>
constexpr dtype dtype_of() {
  if constexpr (std::is_same<T, float>::value)
    return dtype::float32;
  else if constexpr (std::is_same<T, double>::value)
    return dtype::float64;
  else if constexpr (std::is_same<T, int32_t>::value)
    return dtype::int32;
  else {
    static_assert(std::is_same<T, int64_t>::value,
                  "lumen::ml::tensor holds float, double, int32_t or "
                  "int64_t");
    return dtype::int64;
  }
}

class tensor {
public:
  /// An empty float32 tensor of shape [0].
  tensor();

  /// Zeros of `shape` (a dimension may be 0; none may be negative).
  explicit tensor(std::vector<int64_t> shape, dtype type = dtype::float32);

  /// A 1-D tensor holding `values` (copied once, into shared storage).
  template <class T>
  static tensor from(const std::vector<T>& values) {
    return copy_of({static_cast<int64_t>(values.size())}, dtype_of<T>(),
                   reinterpret_cast<const char*>(values.data()));
  }

  /// `parts` one after another along the first dimension (PyTorch's
  /// `cat(parts, 0)`), their numbers copied once; throws `usage_error`
  /// for no parts, a rank-0 part, or parts whose dtypes or other
  /// dimensions differ.
  static tensor cat(const std::vector<tensor>& parts);

  dtype type() const noexcept {
    return type_;
  }

  const std::vector<int64_t>& shape() const noexcept {
    return shape_;
  }

  /// Number of elements.
  size_t numel() const noexcept {
    return numel_;
  }

  size_t nbytes() const noexcept {
    return numel_ * size_of(type_);
  }

  /// The elements as `T`; throws `usage_error` unless `T` is the dtype.
  template <class T>
  T* data() {
    check<T>();
    return reinterpret_cast<T*>(raw());
  }

  template <class T>
  const T* data() const {
    check<T>();
    return reinterpret_cast<const T*>(raw());
  }

  /// The elements as an Eigen column vector, in place.
  template <class T>
  Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>> vec() {
    return {data<T>(), static_cast<Eigen::Index>(numel_)};
  }

  template <class T>
  Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>> vec() const {
    return {data<T>(), static_cast<Eigen::Index>(numel_)};
  }

  /// A 2-D tensor as a row-major Eigen matrix, in place; throws
  /// `usage_error` for another rank.
  template <class T>
  Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>
  mat() {
    require_rank(2);
    return {data<T>(), static_cast<Eigen::Index>(shape_[0]),
            static_cast<Eigen::Index>(shape_[1])};
  }

  /// The elements copied out.
  template <class T>
  std::vector<T> to_vector() const {
    auto p = data<T>();
    return std::vector<T>(p, p + numel_);
  }

  /// A tensor with its own copy of the numbers.
  tensor clone() const;

  /// A view of `shape` and `type` over `data`, which `owner` keeps alive
  /// (read in place, copied on the first write); throws `usage_error` for
  /// a bad shape.
  static tensor view(std::vector<int64_t> shape, dtype type, const char* data,
                     std::shared_ptr<const void> owner);

  /// Rows `[begin, end)` of a tensor of rank 1 or more, viewing its
  /// numbers (as PyTorch's `narrow(0, ...)`); throws `usage_error` for a
  /// range out of bounds.
  tensor rows(size_t begin, size_t end) const;

  /// True if the numbers are another's (a view) rather than its own.
  bool is_view() const noexcept {
    return view_ != nullptr;
  }

  /// Raw bytes, `nbytes()` of them; a view becomes a copy first.
  char* raw() {
    if (view_ != nullptr)
      own();
    return storage_->data();
  }
  const char* raw() const noexcept {
    return raw_begin();
  }

  /// Same dtype, shape and numbers.
  friend bool operator==(const tensor& a, const tensor& b);

  /// "float32[2, 3]".
  std::string describe() const;

private:
  // How the tensor crosses processes (lumen/ml/wire.hpp), kept out of
  // this header so that plain C++ (the browser playground) can use it.
  friend struct tensor_wire;

  /// Makes a view's numbers its own.
  void own();

  const char* raw_begin() const noexcept {
    return view_ != nullptr ? view_ : storage_->data();
  }

  /// The bytes dtype and shape take; for an unknown dtype, a negative
  /// dimension or an overflow, what is wrong instead.
  std::string bytes_for_shape(size_t& bytes) const;

  template <class T>
  void check() const {
    if (type_ != dtype_of<T>())
      throw usage_error("this tensor holds " + std::string{to_string(type_)} +
                        ", not " + to_string(dtype_of<T>()) + "; use data<" +
                        cpp_name(type_) + ">()");
  }

  static const char* cpp_name(dtype t) noexcept;
  /// A tensor of `shape` and `type` on `storage` (null for a view, whose
  /// place the caller sets).
  tensor(std::vector<int64_t> shape, dtype type,
         std::shared_ptr<std::vector<char>> storage);
  /// A tensor of `shape` and `type` holding a copy of the bytes at `data`
  /// (never zero-filled first).
  static tensor copy_of(std::vector<int64_t> shape, dtype type,
                        const char* data);
  void require_rank(size_t rank) const;
  /// New, unshared storage for a decoder to fill.
  std::vector<char>& fresh_storage();
  /// After decoding: dtype, shape and byte count must agree; what is
  /// wrong if they do not.
  std::string check_loaded();

  dtype type_ = dtype::float32;
  std::vector<int64_t> shape_;
  size_t numel_ = 0;
  std::shared_ptr<std::vector<char>> storage_; // unless a view
  const char* view_ = nullptr;                 // a view's numbers
  std::shared_ptr<const void> owner_;          // keeps them alive
};

/// The index of the first NaN or infinite value of `v[0, n)`, or `n` if
/// all are finite. Checks blocks without branching, so that a gradient of
/// millions of values costs a pass at memory speed.
size_t first_non_finite(const float* v, size_t n) noexcept;

} // namespace lumen::ml
