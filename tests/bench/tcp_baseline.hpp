#pragma once

// A raw TCP echo over loopback, as the baseline for Lumen's cross-process
// figures: a child process echoes length-prefixed messages back.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "transport/socket_io.hpp"

namespace lumen::bench {

inline void write_all(int fd, const void* data, size_t n) {
  if (!detail::write_all(fd, data, n))
    throw std::runtime_error("tcp baseline: send failed");
}

using detail::read_all;

inline void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// The echo server in a child process, and a connected client socket.
class tcp_echo {
public:
  /// Must run before the process starts threads (it forks).
  tcp_echo() {
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listener, 1) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("tcp baseline: cannot listen");
    pid_ = ::fork();
    if (pid_ == 0) {
      int c = ::accept(listener, nullptr, nullptr);
      // The client ends of echoes forked before this one came with the
      // fork: held here, they would keep those echoes from seeing EOF.
      if (c != 3 && ::dup2(c, 3) == 3)
        c = 3;
      ::close_range(4, ~0u, 0);
      no_delay(c);
      std::vector<char> buf;
      for (uint64_t n = 0; read_all(c, &n, sizeof(n));) {
        buf.resize(n);
        if (!read_all(c, buf.data(), n))
          break;
        write_all(c, &n, sizeof(n));
        write_all(c, buf.data(), n);
      }
      ::_exit(0);
    }
    ::close(listener);
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      throw std::runtime_error("tcp baseline: cannot connect");
    no_delay(fd_);
  }

  ~tcp_echo() {
    ::close(fd_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }

  /// Sends `out` and reads the echo into `in`.
  void round_trip(const std::vector<char>& out, std::vector<char>& in) {
    uint64_t n = out.size();
    write_all(fd_, &n, sizeof(n));
    write_all(fd_, out.data(), n);
    uint64_t m = 0;
    if (!read_all(fd_, &m, sizeof(m)) || m != n)
      throw std::runtime_error("tcp baseline: short echo");
    in.resize(m);
    if (!read_all(fd_, in.data(), m))
      throw std::runtime_error("tcp baseline: short echo");
  }

private:
  pid_t pid_ = -1;
  int fd_ = -1;
};

} // namespace lumen::bench
