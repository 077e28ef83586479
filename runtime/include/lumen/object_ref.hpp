#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <type_traits>
#include <utility>

#include "lumen/detail/object_state.hpp"

namespace lumen {

/// A future for the result of a task, an actor call or a `put`, like Ray's
/// ObjectRef. Copies share one object. Read it with `lumen::get`, test it
/// with `lumen::wait`, or pass it to another call as an argument of type T,
/// where it is resolved before that call runs. A default-constructed ref is
/// empty; `get` on it throws `usage_error`.
template <class T>
class ObjectRef {
public:
  static_assert(!std::is_reference<T>::value && !std::is_const<T>::value,
                "ObjectRef<T>: T must be a plain value type");

  using value_type = T;

  ObjectRef() = default;

  explicit ObjectRef(std::shared_ptr<detail::value_state<T>> st)
    : st_(std::move(st)) {}

  /// False for a default-constructed or moved-from ref.
  bool valid() const noexcept {
    return st_ != nullptr;
  }

  /// True once the value or an error is there; never blocks.
  bool ready() const noexcept {
    return st_ && st_->ready();
  }

  /// Identifies the object in error messages; 0 for an empty ref.
  uint64_t id() const noexcept {
    return st_ ? st_->id() : 0;
  }

  const std::shared_ptr<detail::value_state<T>>& state() const noexcept {
    return st_;
  }

  friend bool operator==(const ObjectRef& x, const ObjectRef& y) noexcept {
    return x.st_ == y.st_;
  }

  friend bool operator!=(const ObjectRef& x, const ObjectRef& y) noexcept {
    return !(x == y);
  }

  friend std::ostream& operator<<(std::ostream& out, const ObjectRef& x) {
    return out << "ObjectRef(" << x.id() << ")";
  }

private:
  std::shared_ptr<detail::value_state<T>> st_;
};

namespace detail {

template <class T>
struct is_object_ref : std::false_type {};

template <class T>
struct is_object_ref<ObjectRef<T>> : std::true_type {};

} // namespace detail

} // namespace lumen
