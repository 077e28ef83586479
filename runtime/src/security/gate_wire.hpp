#pragma once

// The gate's handshake on the wire, shared by both sides (gate.hpp
// describes it).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace lumen::detail {

inline constexpr std::array<char, 8> gate_magic{'L', 'M', 'N', 'G',
                                                'A', 'T', 'E', '1'};
inline constexpr size_t greeting_size = gate_magic.size() + 2;
inline constexpr size_t max_reason = 256;
inline constexpr uint8_t verdict_admitted = 0;
inline constexpr uint8_t verdict_refused = 1;
inline const std::string wrong_token_reason = "wrong cluster token";
inline const std::string tls_required_reason =
  "this cluster's links use TLS: pass --tls (and the cluster's --tls-cert, "
  "--tls-key and --tls-ca if it uses certificates), or set LUMEN_TLS=1";

inline void put_u16(char* out, size_t x) {
  out[0] = static_cast<char>(x & 0xff);
  out[1] = static_cast<char>((x >> 8) & 0xff);
}

inline size_t get_u16(const char* in) {
  return static_cast<size_t>(static_cast<unsigned char>(in[0])) |
         static_cast<size_t>(static_cast<unsigned char>(in[1])) << 8;
}

inline void set_blocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
}

inline void set_no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// How long a TCP link may go without an acknowledgement from its peer
/// before the kernel gives it up (`keep_probing`).
inline constexpr int unacknowledged_ms = 1500;

/// Has the kernel probe an idle link every second and fail it once the
/// peer acknowledged nothing for `unacknowledged_ms`, sent data included:
/// a peer behind a cut link sends no reset and no end of stream, and a
/// call blocked on the link would otherwise wait for its own timeout. The
/// acknowledgements come from the peer's kernel, so a busy or stopped
/// peer process still answers. Does nothing on a socket pair (a TLS
/// link's plaintext end, whose relay holds the TCP socket).
inline void keep_probing(int fd) {
  int one = 1, idle_s = 1, interval_s = 1, probes = 1;
  int user_timeout = unacknowledged_ms;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout,
               sizeof(user_timeout));
}

} // namespace lumen::detail
