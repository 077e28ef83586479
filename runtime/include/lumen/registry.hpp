#pragma once

#include <array>
#include <cstring>
#include <string>
#include <typeinfo>
#include <vector>

/// Registers a free function as a remote function under its spelled name,
/// like RAY_REMOTE. `lumen::task(fn)` needs it; a name registered twice makes
/// `lumen::init` fail with a message naming it.
#define LUMEN_REMOTE(fn)                                                       \
  static const bool LUMEN_PP_CAT(lumen_remote_registered_, __COUNTER__)        \
    = ::lumen::detail::register_function(#fn, fn)

/// Registers a class as an actor type together with the methods that callers
/// may invoke: LUMEN_ACTOR(Counter, &Counter::add, &Counter::get).
#define LUMEN_ACTOR(cls, ...)                                                  \
  static const bool LUMEN_PP_CAT(lumen_actor_registered_, __COUNTER__)         \
    = ::lumen::detail::register_actor<cls>(#cls, #__VA_ARGS__, __VA_ARGS__)

#define LUMEN_PP_CAT(a, b) LUMEN_PP_CAT_I(a, b)
#define LUMEN_PP_CAT_I(a, b) a##b

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

struct function_entry {
  std::string name;
  erased_fn fn;
  const std::type_info* signature;
};

struct method_entry {
  std::string name; // "Class::method"
  method_key key;
  const std::type_info* signature;
};

struct actor_class_entry {
  std::string name;
  const std::type_info* type;
  std::vector<method_entry> methods;

  /// The entry for `key`, or null if the method was not registered.
  const method_entry* find(const method_key& key,
                           const std::type_info& signature) const noexcept;
};

/// Registers at static-init time; clashes are recorded, not thrown, since
/// nothing could catch them before main().
bool add_function(function_entry entry);
bool add_actor_class(actor_class_entry entry);

/// The entry for a registered function, or null.
const function_entry* find_function(erased_fn fn);

/// The entry for a registered actor class, or null.
const actor_class_entry* find_actor_class(const std::type_info& type);

/// Registration problems found so far (name clashes), one line each.
std::vector<std::string> registration_errors();

/// Splits "&C::a, &C::b" into {"C::a", "C::b"}.
std::vector<std::string> split_method_names(const char* spelled);

template <class F>
bool register_function(const char* name, F* fn) {
  return add_function({name, reinterpret_cast<erased_fn>(fn), &typeid(F*)});
}

template <class C, class... Ms>
bool register_actor(const char* name, const char* spelled, Ms... methods) {
  static_assert(sizeof...(Ms) > 0,
                "LUMEN_ACTOR needs at least one method: "
                "LUMEN_ACTOR(Class, &Class::method, ...)");
  auto names = split_method_names(spelled);
  actor_class_entry entry{name, &typeid(C), {}};
  size_t i = 0;
  ((entry.methods.push_back(
     {i < names.size() ? names[i] : std::string{name} + "::?", key_of(methods),
      &typeid(Ms)}),
    ++i),
   ...);
  return add_actor_class(std::move(entry));
}

} // namespace lumen::detail
