#pragma once

// A connection that passed a gate (gate.hpp): a TCP socket in blocking mode
// and, on a TLS link, the session's record layer, which every byte on it
// goes through. The data plane and channels read and write it on their own
// threads; CAF's middleman, which only takes a socket, gets the plaintext
// end of a relay instead (tls_context::relay).

#include <sys/uio.h>
#include <unistd.h>

#include <memory>
#include <utility>

#include "security/tls_records.hpp"
#include "transport/socket_io.hpp"

namespace lumen::detail {

struct gated_socket {
  int fd = -1;                      // owned: closed with this
  std::unique_ptr<tls_records> tls; // null: plain TCP

  gated_socket() = default;
  explicit gated_socket(int f, std::unique_ptr<tls_records> records = nullptr)
    : fd(f)
    , tls(std::move(records)) {}
  gated_socket(gated_socket&& other) noexcept
    : fd(std::exchange(other.fd, -1))
    , tls(std::move(other.tls)) {}
  gated_socket& operator=(gated_socket&& other) noexcept {
    if (this != &other) {
      reset();
      fd = std::exchange(other.fd, -1);
      tls = std::move(other.tls);
    }
    return *this;
  }
  ~gated_socket() {
    reset();
  }

  void reset() {
    if (fd >= 0)
      ::close(std::exchange(fd, -1));
    tls.reset();
  }

  /// The socket, which the caller closes from now on.
  int release() noexcept {
    return std::exchange(fd, -1);
  }
};

/// Writes all of `iov` (advancing it); false if the peer is gone.
inline bool write_all(gated_socket& s, iovec* iov, int count) {
  return s.tls ? s.tls->write(s.fd, iov, count) : write_all(s.fd, iov, count);
}

inline bool write_all(gated_socket& s, const void* data, size_t n) {
  iovec iov{const_cast<void*>(data), n};
  return write_all(s, &iov, 1);
}

/// Reads exactly `n` bytes (the socket's receive timeout holds); false on
/// EOF, error, or a TLS record that does not open.
inline bool read_all(gated_socket& s, void* data, size_t n) {
  return s.tls ? s.tls->read(s.fd, data, n) : read_all(s.fd, data, n);
}

} // namespace lumen::detail
