#pragma once

#include <array>
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

#include "lumen/detail/codec.hpp"
#include "lumen/detail/object_exchange.hpp"

namespace lumen {

namespace detail {

/// True for the types that can cross a process boundary: arithmetic types,
/// enums, strings, standard containers of such types, ObjectRefs and
/// ActorHandles (which have `inspect` overloads of their own), and any type
/// with a CAF `inspect` overload.
template <class T>
struct is_serializable
  : std::bool_constant<std::is_arithmetic<T>::value || std::is_enum<T>::value ||
                       has_inspect<T>::value> {};

template <>
struct is_serializable<std::string> : std::true_type {};

template <class... Ts>
struct all_serializable : std::conjunction<is_serializable<Ts>...> {};

template <class T, class A>
struct is_serializable<std::vector<T, A>> : is_serializable<T> {};

template <class T, class A>
struct is_serializable<std::deque<T, A>> : is_serializable<T> {};

template <class T, class A>
struct is_serializable<std::list<T, A>> : is_serializable<T> {};

template <class T, size_t N>
struct is_serializable<std::array<T, N>> : is_serializable<T> {};

template <class T>
struct is_serializable<std::optional<T>> : is_serializable<T> {};

template <class K, class V, class... Rest>
struct is_serializable<std::map<K, V, Rest...>> : all_serializable<K, V> {};

template <class K, class V, class... Rest>
struct is_serializable<std::unordered_map<K, V, Rest...>>
  : all_serializable<K, V> {};

template <class K, class... Rest>
struct is_serializable<std::set<K, Rest...>> : is_serializable<K> {};

template <class K, class... Rest>
struct is_serializable<std::unordered_set<K, Rest...>> : is_serializable<K> {};

template <class A, class B>
struct is_serializable<std::pair<A, B>> : all_serializable<A, B> {};

template <class... Ts>
struct is_serializable<std::tuple<Ts...>> : all_serializable<Ts...> {};

template <class T>
constexpr bool is_serializable_v = is_serializable<T>::value;

} // namespace detail

} // namespace lumen
