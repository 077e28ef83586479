#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <caf/error.hpp>
#include <caf/meta/annotation.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/save_callback.hpp>

#include "lumen/errors.hpp"

namespace lumen {

/// Bytes that cannot be decoded into the expected types: truncated, with
/// bytes left over, or with sizes that do not fit the message.
class codec_error : public error {
public:
  using error::error;
};

namespace detail {

using bytes = std::vector<char>;

/// A view of encoded bytes, e.g. the arguments inside a received frame.
struct byte_span {
  const char* data;
  size_t size;
};

inline byte_span span_of(const bytes& b) {
  return {b.data(), b.size()};
}

/// Arithmetic element types whose sequences cross the wire as one block of
/// raw bytes in host byte order (all Lumen nodes must share endianness,
/// as with CAF's raw path).
template <class T>
constexpr bool is_raw_element =
  std::is_arithmetic<T>::value && !std::is_same<T, bool>::value;

template <class T>
struct is_seq : std::false_type {};
template <class T, class A>
struct is_seq<std::vector<T, A>> : std::true_type {};
template <class T, class A>
struct is_seq<std::deque<T, A>> : std::true_type {};
template <class T, class A>
struct is_seq<std::list<T, A>> : std::true_type {};

template <class T>
struct is_assoc : std::false_type {};
template <class... Ts>
struct is_assoc<std::map<Ts...>> : std::true_type {};
template <class... Ts>
struct is_assoc<std::unordered_map<Ts...>> : std::true_type {};
template <class... Ts>
struct is_assoc<std::set<Ts...>> : std::true_type {};
template <class... Ts>
struct is_assoc<std::unordered_set<Ts...>> : std::true_type {};

template <class T>
struct is_tuple_like : std::false_type {};
template <class A, class B>
struct is_tuple_like<std::pair<A, B>> : std::true_type {};
template <class... Ts>
struct is_tuple_like<std::tuple<Ts...>> : std::true_type {};

template <class T>
struct is_std_array : std::false_type {};
template <class T, size_t N>
struct is_std_array<std::array<T, N>> : std::true_type {};

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

class writer;

template <class T, class = void>
struct has_inspect : std::false_type {};

template <class T>
struct has_inspect<T, std::void_t<decltype(inspect(std::declval<writer&>(),
                                                   std::declval<T&>()))>>
  : std::true_type {};

/// Writes values into bytes. Also a CAF 0.17 inspector, so user types with
/// an `inspect` overload serialize through it.
class writer {
public:
  using result_type = void;
  static constexpr bool reads_state = true;
  static constexpr bool writes_state = false;

  explicit writer(bytes& out)
    : out_(out) {}

  template <class... Ts>
  void operator()(Ts&&... xs) {
    (put(xs), ...);
  }

private:
  void raw(const void* p, size_t n) {
    auto c = static_cast<const char*>(p);
    // One pass over the data; resize-then-copy would zero it first. GCC 12
    // misreads insert's copy as an overflow (-Wstringop-overflow).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
    out_.insert(out_.end(), c, c + n);
#pragma GCC diagnostic pop
  }

  void size(size_t n) {
    auto v = static_cast<uint64_t>(n);
    raw(&v, sizeof(v));
  }

  template <class T>
  void put(const T& x) {
    if constexpr (std::is_base_of<caf::meta::annotation, T>::value) {
      if constexpr (caf::meta::is_save_callback<T>::value)
        x.fun();
    } else if constexpr (std::is_same<T, bool>::value) {
      char b = x ? 1 : 0;
      raw(&b, 1);
    } else if constexpr (std::is_arithmetic<T>::value ||
                         std::is_enum<T>::value) {
      raw(&x, sizeof(T));
    } else if constexpr (std::is_same<T, std::string>::value) {
      size(x.size());
      raw(x.data(), x.size());
    } else if constexpr (is_seq<T>::value || is_assoc<T>::value) {
      using elem = typename T::value_type;
      size(x.size());
      if constexpr (is_raw_element<elem> &&
                    std::is_same<T, std::vector<elem>>::value)
        raw(x.data(), x.size() * sizeof(elem));
      else
        for (const auto& e : x)
          put(e);
    } else if constexpr (is_std_array<T>::value) {
      for (auto& e : x)
        put(e);
    } else if constexpr (is_tuple_like<T>::value) {
      std::apply([this](const auto&... es) { (put(es), ...); }, x);
    } else if constexpr (is_optional<T>::value) {
      put(x.has_value());
      if (x)
        put(*x);
    } else {
      static_assert(has_inspect<T>::value,
                    "lumen: no way to serialize this type; give it a CAF "
                    "inspect() overload");
      inspect(*this, const_cast<T&>(x));
    }
  }

  bytes& out_;
};

/// Reads what `writer` wrote; throws `codec_error` on malformed input.
class reader {
public:
  using result_type = void;
  static constexpr bool reads_state = false;
  static constexpr bool writes_state = true;

  reader(const char* data, size_t n)
    : data_(data)
    , size_(n) {}

  template <class... Ts>
  void operator()(Ts&&... xs) {
    (get(xs), ...);
  }

  /// Throws unless every byte was consumed.
  void finish() const;

private:
  void raw(void* p, size_t n) {
    if (n == 0)
      return; // p may be an empty vector's null data()
    if (n > size_ - pos_)
      truncated(n);
    std::memcpy(p, data_ + pos_, n);
    pos_ += n;
  }

  /// An element count, checked against the bytes left so that a corrupt
  /// size cannot make us allocate without bound.
  size_t count(size_t min_elem_size) {
    uint64_t n = 0;
    raw(&n, sizeof(n));
    if (min_elem_size > 0 && n > (size_ - pos_) / min_elem_size)
      oversized(n);
    return static_cast<size_t>(n);
  }

  [[noreturn]] void truncated(size_t wanted) const;
  [[noreturn]] void oversized(uint64_t n) const;

  template <class T>
  void get(T& x) {
    if constexpr (std::is_base_of<caf::meta::annotation, T>::value) {
      // A type's own check of what it just read (CAF's load_callback).
      if constexpr (caf::meta::is_load_callback<T>::value)
        if (auto err = x.fun())
          throw codec_error("a value failed its own check after decoding: " +
                            caf::to_string(err));
    } else if constexpr (std::is_same<T, bool>::value) {
      char b = 0;
      raw(&b, 1);
      x = b != 0;
    } else if constexpr (std::is_arithmetic<T>::value ||
                         std::is_enum<T>::value) {
      raw(&x, sizeof(T));
    } else if constexpr (std::is_same<T, std::string>::value) {
      x.resize(count(1));
      raw(x.data(), x.size());
    } else if constexpr (is_seq<T>::value) {
      using elem = typename T::value_type;
      if constexpr (is_raw_element<elem> &&
                    std::is_same<T, std::vector<elem>>::value) {
        x.resize(count(sizeof(elem)));
        raw(x.data(), x.size() * sizeof(elem));
      } else {
        auto n = count(1);
        x.clear();
        for (size_t i = 0; i < n; ++i) {
          elem e{};
          get(e);
          x.push_back(std::move(e));
        }
      }
    } else if constexpr (is_assoc<T>::value) {
      auto n = count(1);
      x.clear();
      for (size_t i = 0; i < n; ++i) {
        std::remove_const_t<typename T::key_type> k{};
        if constexpr (std::is_same<typename T::key_type,
                                   typename T::value_type>::value) {
          get(k);
          x.insert(std::move(k));
        } else {
          typename T::mapped_type v{};
          get(k);
          get(v);
          x.emplace(std::move(k), std::move(v));
        }
      }
    } else if constexpr (is_std_array<T>::value) {
      for (auto& e : x)
        get(e);
    } else if constexpr (is_tuple_like<T>::value) {
      std::apply([this](auto&... es) { (get(es), ...); }, x);
    } else if constexpr (is_optional<T>::value) {
      bool has = false;
      get(has);
      if (has) {
        typename T::value_type v{};
        get(v);
        x = std::move(v);
      } else {
        x.reset();
      }
    } else {
      inspect(*this, x);
    }
  }

  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

/// Serializes `xs` into one buffer.
template <class... Ts>
bytes encode(const Ts&... xs) {
  bytes out;
  writer w{out};
  w(xs...);
  return out;
}

/// Deserializes exactly the bytes that encoding a `Tuple`'s elements wrote.
template <class Tuple>
Tuple decode_tuple(byte_span in) {
  Tuple out;
  reader r{in.data, in.size};
  std::apply([&r](auto&... xs) { r(xs...); }, out);
  r.finish();
  return out;
}

template <class Tuple>
Tuple decode_tuple(const bytes& in) {
  return decode_tuple<Tuple>(span_of(in));
}

/// Deserializes exactly the bytes `encode<Ts...>` wrote.
template <class... Ts>
std::tuple<Ts...> decode(const bytes& in) {
  return decode_tuple<std::tuple<Ts...>>(in);
}

template <class... Ts>
std::tuple<Ts...> decode(byte_span in) {
  return decode_tuple<std::tuple<Ts...>>(in);
}

} // namespace detail

} // namespace lumen
