#pragma once

#include <cstdint>
#include <string>

namespace lumen::detail {

/// A peer's HOST:PORT.
struct address {
  std::string host;
  uint16_t port = 0;

  std::string to_string() const {
    return host + ":" + std::to_string(port);
  }
};

/// Parses HOST:PORT (PORT in 1..65535, HOST not empty); throws
/// `usage_error` naming the bad text and showing the right form.
address parse_address(const std::string& text);

/// The address of this machine that packets to `peer` leave from (what
/// `peer`'s network can reach this process at); "127.0.0.1" if none.
std::string local_host_towards(const address& peer);

} // namespace lumen::detail
