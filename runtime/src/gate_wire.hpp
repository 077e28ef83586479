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

} // namespace lumen::detail
