#pragma once

// Blocking socket helpers shared by the data plane and the benchmarks'
// raw TCP baselines.

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <cerrno>
#include <chrono>
#include <cstddef>

namespace lumen::detail {

/// Bounds how long a blocking receive (and, with `sending`, a send) on
/// `fd` waits; 0 waits forever.
inline void set_socket_timeout(int fd, std::chrono::milliseconds t,
                               bool sending) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (sending)
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/// Writes all of `iov` (advancing it); false if the peer is gone.
inline bool write_all(int fd, iovec* iov, int count) {
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    auto n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    auto left = static_cast<size_t>(n);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return true;
}

inline bool write_all(int fd, const void* data, size_t n) {
  iovec iov{const_cast<void*>(data), n};
  return write_all(fd, &iov, 1);
}

/// Reads exactly `n` bytes; false on EOF or error.
inline bool read_all(int fd, void* data, size_t n) {
  auto p = static_cast<char*>(data);
  while (n > 0) {
    auto k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

} // namespace lumen::detail
