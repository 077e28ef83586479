#pragma once

#include <string>

namespace lumen::detail {

/// Writes a timestamped line to stderr, which is a node's log file when it
/// runs in the background. Thread-safe.
void log_line(const std::string& text);

} // namespace lumen::detail
