#pragma once

// How the ML layer's values cross processes in CAF messages: tensors,
// data sets, compressed gradients and model specs. The only ML header
// that names CAF's inspectors, so that the plain C++ of the others
// (models, codecs, the server's rules) also builds where CAF cannot go,
// as in the browser playground. A file that puts one of these values in a
// message includes it; the typed actors' headers do.
//
// Every byte block is one raw block, never element by element, and its
// length is what the fields before it say: a peer's length word never
// sizes a buffer, and a block of another length is refused unread.

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/deserializer.hpp>
#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>
#include <caf/serializer.hpp>

#include <lumen/caf_interop.hpp>

#include "lumen/ml/compress.hpp"
#include "lumen/ml/data.hpp"
#include "lumen/ml/models.hpp"
#include "lumen/ml/tensor.hpp"

namespace lumen::ml {

namespace detail {

inline caf::error refuse(const std::string& why) {
  if (why.empty())
    return caf::none;
  return caf::make_error(caf::sec::invalid_argument, why);
}

/// Begins a byte block that must be `want` bytes long.
inline caf::error begin_exact_bytes(caf::deserializer& f, size_t want,
                                    const std::string& what) {
  size_t n = 0;
  if (auto err = f.begin_sequence(n))
    return err;
  if (n != want)
    return refuse(what + " needs " + std::to_string(want) +
                  " bytes, the peer announced " + std::to_string(n));
  return caf::none;
}

/// Reads a byte block that must be `want` bytes long.
template <class Bytes>
caf::error load_exact_bytes(caf::deserializer& f, Bytes& v, size_t want,
                            const std::string& what) {
  if (auto err = begin_exact_bytes(f, want, what))
    return err;
  auto n = want;
  v.resize(n);
  if (n > 0)
    if (auto err = f.apply_raw(n, v.data()))
      return err;
  return f.end_sequence();
}

} // namespace detail

/// A tensor's fields for CAF: dtype, shape, then the bytes.
struct tensor_wire {
  /// The numbers as CAF writes a vector of bytes, from wherever they are
  /// (a view is written in place).
  struct saved_bytes {
    const char* data;
    size_t size;

    friend caf::error inspect(caf::serializer& f, saved_bytes& x) {
      size_t n = x.size;
      if (auto err = f.begin_sequence(n))
        return err;
      if (n > 0)
        if (auto err = f.apply_raw(n, const_cast<char*>(x.data)))
          return err;
      return f.end_sequence();
    }
  };

  /// The storage as CAF reads it: of the length dtype and shape allow.
  struct expected_bytes {
    tensor* t;

    friend caf::error inspect(caf::deserializer& f, expected_bytes& x) {
      return load(f, *x.t);
    }
  };

  /// Blocks from this size on are read in place when they came in a
  /// frame from another process (lumen::view_received_bytes): a gradient
  /// or a model's weights is then not copied on its way in.
  static constexpr size_t in_place_from = size_t{64} << 10;

  static caf::error load(caf::deserializer& f, tensor& t) {
    size_t want = 0;
    if (auto err = detail::refuse(t.bytes_for_shape(want)))
      return err;
    auto what = "a " + t.describe() + " tensor";
    if (want < in_place_from)
      return detail::load_exact_bytes(f, *t.storage_, want, what);
    if (auto err = detail::begin_exact_bytes(f, want, what))
      return err;
    std::shared_ptr<const void> owner;
    if (auto at = view_received_bytes(f, want, size_of(t.type_), owner)) {
      t.storage_.reset();
      t.view_ = at;
      t.owner_ = std::move(owner);
    } else {
      t.storage_->resize(want);
      if (auto err = f.apply_raw(want, t.storage_->data()))
        return err;
    }
    return f.end_sequence();
  }

  template <class Inspector>
  static typename Inspector::result_type apply(Inspector& f, tensor& x) {
    auto name = caf::meta::type_name("lumen::ml::tensor");
    auto loaded = caf::meta::load_callback(
      [&x] { return detail::refuse(x.check_loaded()); });
    if constexpr (std::is_same<Inspector, caf::deserializer>::value) {
      x.fresh_storage();
      expected_bytes bytes{&x};
      return f(name, x.type_, x.shape_, bytes, loaded);
    } else if constexpr (Inspector::writes_state) {
      auto& fresh = x.fresh_storage(); // never into storage others share
      return f(name, x.type_, x.shape_, fresh, loaded);
    } else if constexpr (std::is_base_of<caf::serializer, Inspector>::value) {
      // const: raw() of a mutable view would copy it first.
      saved_bytes bytes{std::as_const(x).raw(), x.nbytes()};
      return f(name, x.type_, x.shape_, bytes);
    } else {
      // Lumen's codec and CAF's printers, which take a vector of bytes.
      if (x.view_ == nullptr)
        return f(name, x.type_, x.shape_, *x.storage_);
      std::vector<char> bytes(x.view_, x.view_ + x.nbytes());
      return f(name, x.type_, x.shape_, bytes);
    }
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor& x) {
  return tensor_wire::apply(f, x);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, dataset& x) {
  return f(caf::meta::type_name("lumen::ml::dataset"), x.features, x.labels);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_spec& x) {
  return f(caf::meta::type_name("lumen::ml::model_spec"), x.kind, x.dim,
           x.hidden, x.classes, x.layers, x.input);
}

namespace detail {

/// The byte block of a `compressed` as CAF reads it.
struct compressed_bytes {
  compressed* c;

  friend caf::error inspect(caf::deserializer& f, compressed_bytes& x) {
    return load_exact_bytes(f, x.c->bytes,
                            compressed_size(x.c->kind, x.c->numel),
                            std::string{"a compressed gradient of "} +
                              std::to_string(x.c->numel) + " values");
  }
};

} // namespace detail

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

} // namespace lumen::ml
