#pragma once

// A process that serves as a node until it is told to stop: `lumen start
// --block`, a background node, and the embedded cluster's local nodes.

namespace lumen::detail {

/// Blocks SIGINT and SIGTERM in the calling thread and the threads it
/// starts after, so that serve_until_stopped receives them; call it
/// before the runtime starts its threads.
void mask_stop_signals();

/// Waits for SIGINT or SIGTERM, then shuts the runtime down. A second
/// signal before that finished ends the process at once (exit code 1).
void serve_until_stopped();

} // namespace lumen::detail
