#pragma once

// A man in the middle on loopback for tests: relays one connection to a
// port and keeps every byte it saw, both ways, to check what a link shows
// to whoever can read the wire.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include <boost/test/unit_test.hpp>

namespace lumen::test {

inline int connect_loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline int listen_any(uint16_t& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) ==
                0);
  BOOST_REQUIRE(::listen(fd, 4) == 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return fd;
}

/// Relays the first connection to its port on to `target`; with `drops`,
/// the first `drops` connections are closed once they sent something
/// (as a gate too busy to finish their handshake), the next relayed.
class wiretap {
public:
  explicit wiretap(uint16_t target, int drops = 0)
    : listener_(listen_any(port_)) {
    relay_ = std::thread{[this, target, drops] {
      int in = -1;
      for (int i = 0; i <= drops; ++i) {
        in = ::accept(listener_, nullptr, nullptr);
        if (in < 0)
          return;
        if (i < drops) {
          char some[64];
          static_cast<void>(::recv(in, some, sizeof(some), 0));
          ::close(in);
        }
      }
      int out = connect_loopback(target);
      if (out < 0) {
        ::close(in);
        return;
      }
      pollfd p[2] = {{in, POLLIN, 0}, {out, POLLIN, 0}};
      char buf[65536];
      for (;;) {
        if (::poll(p, 2, 10000) <= 0)
          break;
        int from = (p[0].revents & (POLLIN | POLLHUP)) ? 0 : 1;
        auto n = ::recv(p[from].fd, buf, sizeof(buf), 0);
        if (n <= 0)
          break;
        {
          std::lock_guard<std::mutex> guard{mtx_};
          seen_.append(buf, static_cast<size_t>(n));
        }
        if (::send(p[1 - from].fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL) !=
            n)
          break;
      }
      ::close(in);
      ::close(out);
    }};
  }

  ~wiretap() {
    ::shutdown(listener_, SHUT_RDWR);
    relay_.join();
    ::close(listener_);
  }

  uint16_t port() const {
    return port_;
  }

  std::string seen() {
    std::lock_guard<std::mutex> guard{mtx_};
    return seen_;
  }

private:
  uint16_t port_ = 0;
  int listener_;
  std::thread relay_;
  std::mutex mtx_;
  std::string seen_;
};

} // namespace lumen::test
