#pragma once

// Registration of remote functions and actor classes by name, so that any
// node of a cluster can run them.

#include "lumen/detail/registry.hpp"

/// Registers a free function as a remote function under its spelled name,
/// like RAY_REMOTE. `lumen::task(fn)` needs it; a name registered twice makes
/// `lumen::init` fail with a message naming it.
#define LUMEN_REMOTE(fn)                                                       \
  static const bool LUMEN_PP_CAT(lumen_remote_registered_, __COUNTER__) =      \
    ::lumen::detail::register_function(#fn, fn)

/// Registers a class as an actor type together with the methods that callers
/// may invoke: LUMEN_ACTOR(Counter, &Counter::add, &Counter::get).
#define LUMEN_ACTOR(cls, ...)                                                  \
  static const bool LUMEN_PP_CAT(lumen_actor_registered_, __COUNTER__) =       \
    ::lumen::detail::register_actor<cls>(#cls, #__VA_ARGS__, __VA_ARGS__)

/// Registers how to build an actor class from constructor arguments of the
/// given types, written as a function type: LUMEN_ACTOR_CTOR(Counter(int)).
/// A node hosts actors that other processes create only if its code has
/// this (a program that itself calls lumen::actor<Counter>(int) has it).
#define LUMEN_ACTOR_CTOR(signature)                                            \
  static const bool LUMEN_PP_CAT(lumen_ctor_registered_, __COUNTER__) =        \
    ::lumen::detail::constructor_of<signature>::done

#define LUMEN_PP_CAT(a, b) LUMEN_PP_CAT_I(a, b)
#define LUMEN_PP_CAT_I(a, b) a##b
