#include "transport/address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <memory>

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

std::string local_host_towards(const address& peer) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(peer.host.c_str(), std::to_string(peer.port).c_str(),
                    &hints, &found) != 0)
    return "127.0.0.1";
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard{found, ::freeaddrinfo};
  // Connecting a datagram socket sends nothing: the kernel only picks the
  // route, and with it the local address.
  int fd = ::socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return "127.0.0.1";
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  bool ok = ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  ::close(fd);
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw = local.ss_family == AF_INET6
                      ? static_cast<const void*>(
                          &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                      : static_cast<const void*>(
                          &reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
  if (!ok || ::inet_ntop(local.ss_family, raw, text, sizeof(text)) == nullptr)
    return "127.0.0.1";
  return text;
}

} // namespace lumen::detail
