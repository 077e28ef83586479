#include "address.hpp"

#include <charconv>

#include "lumen/errors.hpp"

namespace lumen::detail {

address parse_address(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw usage_error("'" + text +
                      "' is not an address: write HOST:PORT, e.g. "
                      "127.0.0.1:6380");
  unsigned port = 0;
  auto first = text.data() + colon + 1;
  auto last = text.data() + text.size();
  auto [end, ec] = std::from_chars(first, last, port);
  if (ec != std::errc{} || end != last || first == last || port < 1 ||
      port > 65535)
    throw usage_error("'" + text +
                      "' has no valid port: write HOST:PORT "
                      "with a port from 1 to 65535, e.g. 127.0.0.1:6380");
  return {text.substr(0, colon), static_cast<uint16_t>(port)};
}

} // namespace lumen::detail
