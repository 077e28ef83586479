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

/// ::recv, retried after a signal with what is left of the socket's
/// receive timeout, not all of it again (signals, such as SIGUSR1 asking
/// for flight records, would keep a wait for a dead peer alive): once it
/// is spent, fails as timed out (EAGAIN).
inline ssize_t recv_in_time(int fd, void* data, size_t n) {
  using namespace std::chrono;
  auto start = steady_clock::now();
  auto k = ::recv(fd, data, n, 0);
  if (k >= 0 || errno != EINTR)
    return k;
  timeval whole_tv{};
  socklen_t len = sizeof whole_tv;
  ::getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &whole_tv, &len);
  auto whole = seconds(whole_tv.tv_sec) + microseconds(whole_tv.tv_usec);
  for (;;) {
    if (whole.count() > 0) {
      auto left =
        duration_cast<microseconds>(whole - (steady_clock::now() - start));
      if (left.count() <= 0) {
        k = -1;
        errno = EAGAIN;
        break;
      }
      timeval tv{static_cast<time_t>(left.count() / 1000000),
                 static_cast<suseconds_t>(left.count() % 1000000)};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    k = ::recv(fd, data, n, 0);
    if (k >= 0 || errno != EINTR)
      break;
  }
  if (whole.count() > 0) {
    auto saved = errno;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &whole_tv, sizeof whole_tv);
    errno = saved;
  }
  return k;
}

/// Reads exactly `n` bytes; false on EOF or error.
inline bool read_all(int fd, void* data, size_t n) {
  auto p = static_cast<char*>(data);
  while (n > 0) {
    auto k = recv_in_time(fd, p, n);
    if (k <= 0)
      return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

} // namespace lumen::detail
