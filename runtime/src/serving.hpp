#pragma once

// A process that serves as a node until it is told to stop: `lumen start
// --block`, a background node, and the embedded cluster's local nodes.

namespace lumen::detail {

/// Blocks SIGINT and SIGTERM in the calling thread and the threads it
/// starts after, so that serve_until_stopped receives them; call it
/// before the runtime starts its threads.
void mask_stop_signals();

/// How long a stopping process waits for the work still running in it.
inline constexpr long stop_deadline_seconds = 10;

/// Waits for SIGINT or SIGTERM, then shuts the runtime down. Work that
/// does not finish within stop_deadline_seconds, or a second signal, ends
/// the process at once (exit code 1).
void serve_until_stopped();

} // namespace lumen::detail
