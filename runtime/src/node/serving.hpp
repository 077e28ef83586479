#pragma once

// A process that serves as a node until it is told to stop: `lumen start
// --block`, a background node, and the embedded cluster's local nodes.

#include <functional>
#include <string>

namespace lumen::detail {

/// Blocks SIGINT and SIGTERM in the calling thread and the threads it
/// starts after, so that serve_until_stopped receives them; call it
/// before the runtime starts its threads.
void mask_stop_signals();

/// Waits for SIGINT or SIGTERM, then shuts the runtime down. A second
/// signal before that finished ends the process at once (exit code 1),
/// as does the first where `abandoned` says so at its coming (its reason:
/// what the log line gives), not empty.
void serve_until_stopped(
  const std::function<std::string()>& abandoned = nullptr);

} // namespace lumen::detail
