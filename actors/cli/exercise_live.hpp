#pragma once

// The live page of `lumen exercises run ID --browser` and `watch
// --browser`: an HTTP server on localhost that serves one page and streams
// to it, as server-sent events, each run of the learner's program as it
// happens (its --step=json lines, then the check's verdict). A page that
// connects late gets the current run from its start. One thread runs the
// server (Boost.Asio); the tool publishes from its own.

#include <cstdint>
#include <memory>
#include <string>

namespace lumen::cli {

class live_page {
public:
  /// Serves on 127.0.0.1:`port` (0: a free port). Throws `usage_error`
  /// naming the port if it cannot listen there.
  explicit live_page(uint16_t port);
  ~live_page();

  live_page(const live_page&) = delete;
  live_page& operator=(const live_page&) = delete;

  /// "http://127.0.0.1:PORT/".
  std::string url() const;

  /// Sends event `name` with `data` (one line) to every page; "run" starts
  /// a new run, which pages connecting later are sent from.
  void publish(const std::string& name, const std::string& data);

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

} // namespace lumen::cli
