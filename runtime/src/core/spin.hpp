#pragma once

#include <chrono>

#include "lumen/util/spin.hpp"

namespace lumen::detail {

/// How long a thread that expects work or an answer within microseconds
/// polls before it sleeps: long enough to cover another core answering a
/// synchronous call or submitting the next task, short enough that a thread
/// waiting for slow work soon gives its core back. A futex sleep and wake
/// costs 5-10 µs on each side here.
constexpr auto spin_budget = std::chrono::microseconds(50);

/// How long a `get` polls before it parks: longer, since a reply from
/// another process of this machine takes 50-100 µs to come back, and the
/// park would add its sleep and wake to every synchronous call across
/// processes (a typed request: 1.0x a raw TCP ping-pong instead of 0.9x).
constexpr auto get_spin_budget = std::chrono::microseconds(150);

} // namespace lumen::detail
