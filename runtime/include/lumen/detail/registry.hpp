#pragma once

// The registry of remote functions, actor classes and constructors, filled
// at static-initialization time by the macros of lumen/remote.hpp.

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "lumen/detail/codec.hpp"
#include "lumen/detail/serializable.hpp"

namespace lumen::detail {

using erased_fn = void (*)();

/// Bytes of a pointer to member function: two pointers to the same member
/// compare equal byte for byte, which lets one table hold every signature.
using method_key = std::array<unsigned char, 2 * sizeof(void*)>;

template <class M>
method_key key_of(M m) {
  static_assert(sizeof(M) <= sizeof(method_key),
                "lumen: unexpected pointer-to-member size");
  method_key k{};
  std::memcpy(k.data(), &m, sizeof(M));
  return k;
}

/// Runs a registered function on encoded arguments, returning the encoded
/// result; the way a node runs a task sent to it by name.
using function_invoker = bytes (*)(erased_fn fn, byte_span args);

/// Runs a registered method on an instance, from and to bytes.
using method_invoker = bytes (*)(void* self, const method_key& key,
                                 byte_span args);

/// Builds an actor instance from encoded constructor arguments.
using constructor = std::shared_ptr<void> (*)(const bytes& args);

struct function_entry {
  std::string name;
  erased_fn fn;
  const std::type_info* signature;
  function_invoker invoke;
};

struct method_entry {
  std::string name; // "Class::method"
  method_key key;
  const std::type_info* signature;
  method_invoker invoke;
};

struct actor_class_entry {
  std::string name;
  const std::type_info* type;
  std::vector<method_entry> methods;

  /// The entry for `key`, or null if the method was not registered.
  const method_entry* find(const method_key& key,
                           const std::type_info& signature) const noexcept;

  /// The entry named "Class::method", or null.
  const method_entry* find(const std::string& name) const noexcept;
};

struct constructor_entry {
  std::string key; // class and argument types, the same in every process
  constructor construct;
};

/// Registers at static-init time; clashes are recorded, not thrown, since
/// nothing could catch them before main().
bool add_function(function_entry entry);
bool add_actor_class(actor_class_entry entry);
bool add_constructor(constructor_entry entry);

/// The entry for a registered function, or null.
const function_entry* find_function(erased_fn fn);
const function_entry* find_function(const std::string& name);

/// The entry for a registered actor class, or null.
const actor_class_entry* find_actor_class(const std::type_info& type);
const actor_class_entry* find_actor_class(const std::string& name);

/// The constructor registered under `key`, or null.
const constructor_entry* find_constructor(const std::string& key);

/// Registration problems found so far (name clashes), one line each.
std::vector<std::string> registration_errors();

/// How many functions, actor classes and constructors are registered.
size_t registered_count();

/// Splits "&C::a, &C::b" into {"C::a", "C::b"}.
std::vector<std::string> split_method_names(const char* spelled);

template <class... Ts>
constexpr bool serializable_params = (is_serializable_v<std::decay_t<Ts>> &&
                                      ...);

template <class R>
constexpr bool serializable_result =
  std::is_void<R>::value || is_serializable_v<std::decay_t<R>>;

/// Encodes what `f` returns (nothing for void).
template <class F>
bytes encode_result(F&& f) {
  if constexpr (std::is_void<decltype(f())>::value) {
    f();
    return {};
  } else {
    return encode(f());
  }
}

template <class R, class... Ps>
bytes invoke_function(erased_fn f, byte_span in) {
  auto fn = reinterpret_cast<R (*)(Ps...)>(f);
  auto args = decode<std::decay_t<Ps>...>(in);
  return encode_result(
    [&]() -> decltype(auto) { return std::apply(fn, args); });
}

template <class R, class... Ps>
bool register_function(const char* name, R (*fn)(Ps...)) {
  static_assert(serializable_params<Ps...>,
                "lumen: a parameter type is not serializable. Use arithmetic "
                "types, std::string, standard containers of them, or give the "
                "type a CAF inspect() overload");
  static_assert(serializable_result<R>,
                "lumen: the return type of a remote function is not "
                "serializable. Use arithmetic types, std::string, standard "
                "containers of them, or give the type a CAF inspect() "
                "overload");
  if constexpr (serializable_params<Ps...> && serializable_result<R>)
    return add_function({name, reinterpret_cast<erased_fn>(fn),
                         &typeid(R(*)(Ps...)), &invoke_function<R, Ps...>});
  else
    return false;
}

template <class M>
struct method_traits;

template <class C, class R, class... Ps>
struct method_traits<R (C::*)(Ps...)> {
  using result = R;
  using args = std::tuple<std::decay_t<Ps>...>;
  static constexpr bool serializable =
    serializable_params<Ps...> && serializable_result<R>;
};

template <class C, class R, class... Ps>
struct method_traits<R (C::*)(Ps...) const> : method_traits<R (C::*)(Ps...)> {};

template <class C, class M>
bytes invoke_method(void* self, const method_key& key, byte_span in) {
  M m;
  std::memcpy(&m, key.data(), sizeof(M));
  auto args = decode_tuple<typename method_traits<M>::args>(in);
  auto* obj = static_cast<C*>(self);
  return encode_result([&]() -> decltype(auto) {
    return std::apply(
      [&](auto&... xs) -> decltype(auto) { return (obj->*m)(xs...); }, args);
  });
}

template <class C, class M>
method_entry make_method_entry(std::string name, M m) {
  static_assert(method_traits<M>::serializable,
                "lumen: a method listed in LUMEN_ACTOR takes or returns a "
                "type that is not serializable. Use arithmetic types, "
                "std::string, standard containers of them, or give the type a "
                "CAF inspect() overload");
  if constexpr (method_traits<M>::serializable)
    return {std::move(name), key_of(m), &typeid(M), &invoke_method<C, M>};
  else
    return {std::move(name), key_of(m), &typeid(M), nullptr};
}

template <class C, class... Ms>
bool register_actor(const char* name, const char* spelled, Ms... methods) {
  static_assert(sizeof...(Ms) > 0, "LUMEN_ACTOR needs at least one method: "
                                   "LUMEN_ACTOR(Class, &Class::method, ...)");
  auto names = split_method_names(spelled);
  actor_class_entry entry{name, &typeid(C), {}};
  size_t i = 0;
  ((entry.methods.push_back(make_method_entry<C>(
      i < names.size() ? names[i] : std::string{name} + "::?", methods)),
    ++i),
   ...);
  return add_actor_class(std::move(entry));
}

/// The registry key of C's constructor taking `As...`.
template <class C, class... As>
std::string constructor_key() {
  return std::string{typeid(C).name()} + "(" +
         typeid(std::tuple<As...>).name() + ")";
}

/// Registers, at static-init time in every process whose binary creates an
/// actor as `lumen::actor<C>(As...)`, how to build C from encoded `As...`,
/// so that such a process can host actors that others create.
template <class C, class... As>
struct constructor_registration {
  static std::shared_ptr<void> construct(const bytes& in) {
    return std::apply(
      [](const As&... xs) { return std::make_shared<C>(xs...); },
      decode<As...>(in));
  }
  static const bool done;
};

template <class C, class... As>
const bool constructor_registration<C, As...>::done =
  add_constructor({constructor_key<C, As...>(), &construct});

template <class Signature>
struct constructor_of;

template <class C, class... As>
struct constructor_of<C(As...)> : constructor_registration<C, As...> {};

} // namespace lumen::detail
