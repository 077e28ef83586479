#pragma once

#include <cstddef>
#include <exception>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "lumen/detail/serializable.hpp"
#include "lumen/object_ref.hpp"

namespace lumen::detail {

/// A by-value argument, kept for the call (and for its retries).
template <class V>
struct value_slot {
  template <class B>
  explicit value_slot(B&& x)
    : value(std::forward<B>(x)) {}
  V value;
  V& get() noexcept {
    return value;
  }
  void collect(std::vector<std::shared_ptr<object_state>>&) const {}
};

/// An ObjectRef standing in for a parameter of its value type: the call waits
/// for it and reads the value in place, without a copy.
template <class U>
struct ref_slot {
  explicit ref_slot(ObjectRef<U> x)
    : ref(std::move(x)) {}
  ObjectRef<U> ref;
  const U& get() const noexcept {
    return ref.state()->value();
  }
  void collect(std::vector<std::shared_ptr<object_state>>& deps) const {
    deps.push_back(ref.state());
  }
};

template <class P, class A, class = void>
struct slot_for {
  using type = value_slot<std::decay_t<P>>;
};

template <class P, class A>
struct slot_for<P, A,
                std::enable_if_t<is_object_ref<std::decay_t<A>>::value &&
                                 !is_object_ref<std::decay_t<P>>::value>> {
  using type = ref_slot<typename std::decay_t<A>::value_type>;
};

template <class P, class A>
using slot_t = typename slot_for<P, A>::type;

/// Checks, with a message a user can act on, that argument A can be passed to
/// parameter P of a remote function or method.
template <class P, class A>
constexpr bool check_argument() {
  using param = std::decay_t<P>;
  static_assert(!std::is_lvalue_reference<P>::value ||
                  std::is_const<std::remove_reference_t<P>>::value,
                "lumen: remote functions and actor methods take their "
                "parameters by value or by const reference; a non-const "
                "reference could not reach the caller");
  static_assert(is_serializable_v<param>,
                "lumen: a parameter type is not serializable. Use arithmetic "
                "types, std::string, standard containers of them, or give the "
                "type a CAF inspect() overload");
  if constexpr (is_object_ref<std::decay_t<A>>::value &&
                !is_object_ref<param>::value) {
    static_assert(
      std::is_convertible<const typename std::decay_t<A>::value_type&,
                          param>::value,
      "lumen: an ObjectRef<T> argument needs a parameter that T converts to");
  } else {
    static_assert(std::is_constructible<param, A&&>::value,
                  "lumen: an argument does not convert to its parameter type");
  }
  return true;
}

template <class... Ps>
struct param_list {};

/// `x` as a P: itself if it already is one, else converted.
template <class P, class X>
decltype(auto) as_param(const X& x) {
  if constexpr (std::is_same<P, X>::value)
    return (x);
  else
    return P(x);
}

/// The arguments of one call, held until its ObjectRefs are resolved.
template <class Params, class... As>
class arguments;

template <class... Ps, class... As>
class arguments<param_list<Ps...>, As...> {
public:
  static_assert(sizeof...(Ps) == sizeof...(As),
                "lumen: wrong number of arguments for this remote function "
                "or actor method");
  static_assert((check_argument<Ps, As>() && ...));

  template <class... Bs>
  explicit arguments(Bs&&... xs)
    : slots_{slot_t<Ps, As>{std::forward<Bs>(xs)}...} {}

  /// Object states this call must wait for.
  std::vector<std::shared_ptr<object_state>> dependencies() const {
    std::vector<std::shared_ptr<object_state>> deps;
    std::apply([&](const auto&... s) { (s.collect(deps), ...); }, slots_);
    return deps;
  }

  /// Encodes the resolved arguments as the parameter types, so that the
  /// receiver decodes exactly the types the function takes. Requires every
  /// dependency ready.
  bytes encode() {
    return std::apply(
      [](auto&... s) {
        return detail::encode(as_param<std::decay_t<Ps>>(s.get())...);
      },
      slots_);
  }

  /// Applies `f` to the resolved arguments. Requires every dependency ready.
  template <class F>
  decltype(auto) apply(F&& f) {
    return std::apply(
      [&](auto&... s) -> decltype(auto) { return f(s.get()...); }, slots_);
  }

private:
  std::tuple<slot_t<Ps, As>...> slots_;
};

/// The first failed dependency's error, or null.
std::exception_ptr
first_error(const std::vector<std::shared_ptr<object_state>>& deps);

/// Turns the exception being handled into a `task_error` naming `function`.
std::exception_ptr capture_task_error(const std::string& function);

} // namespace lumen::detail
