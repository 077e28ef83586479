#pragma once

#include <chrono>
#include <string>

namespace lumen::detail {

/// Writes a timestamped line to stderr, which is a node's log file when it
/// runs in the background. Thread-safe.
void log_line(const std::string& text);

/// A line about a node starting or stopping as asked. An embedded cluster
/// quiets these for its own local node processes: they are how it runs,
/// not news to its user.
void log_lifecycle(const std::string& text);
void set_lifecycle_quiet(bool quiet);

/// At most five log lines a second, however many peers misbehave: a flood
/// of strangers must not fill the disk. The rest are counted and reported.
/// Not thread-safe: one per event loop.
class log_budget {
public:
  void say(const std::string& line);

private:
  std::chrono::steady_clock::time_point window_;
  int said_ = 0;
  int quiet_ = 0;
};

} // namespace lumen::detail
