#pragma once

// A pulse on the wire (pulse.hpp describes its fields): written and read,
// its MAC made and checked, by both sides of a link.

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace lumen::detail::pulse_wire {

inline constexpr std::array<char, 8> magic{'L', 'M', 'N', 'P',
                                           'U', 'L', 'S', '1'};
inline constexpr uint8_t from_connecting = 0;
inline constexpr uint8_t from_admitting = 1;
// Where each field starts.
inline constexpr size_t at_sender = magic.size();
inline constexpr size_t at_gate = at_sender + 1;
inline constexpr size_t at_link = at_gate + 2;
inline constexpr size_t at_count = at_link + 2;
inline constexpr size_t body_size = at_count + 8;
inline constexpr size_t mac_size = 16;
inline constexpr size_t pulse_size = body_size + mac_size;
using datagram = std::array<unsigned char, pulse_size>;

struct fields {
  uint8_t sender;
  uint16_t gate;
  uint16_t link;
  uint64_t count;
};

inline void put_le(unsigned char* out, uint64_t x, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    out[i] = static_cast<unsigned char>(x >> (8 * i));
}

inline uint64_t get_le(const unsigned char* in, size_t bytes) {
  uint64_t x = 0;
  for (size_t i = 0; i < bytes; ++i)
    x |= uint64_t{in[i]} << (8 * i);
  return x;
}

/// Writes the MAC of `p`'s body, keyed by `token`, after it.
inline void seal(unsigned char* p, const std::string& token) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), p, body_size,
       md, &len);
  std::copy(md, md + mac_size, p + body_size);
}

inline datagram write(const fields& f, const std::string& token) {
  datagram d{};
  std::copy(magic.begin(), magic.end(), d.begin());
  d[at_sender] = f.sender;
  put_le(d.data() + at_gate, f.gate, 2);
  put_le(d.data() + at_link, f.link, 2);
  put_le(d.data() + at_count, f.count, 8);
  seal(d.data(), token);
  return d;
}

/// The fields of the pulse at `p`, if it is one sealed with `token`.
inline std::optional<fields> read(const unsigned char* p,
                                  const std::string& token) {
  if (!std::equal(magic.begin(), magic.end(), p))
    return std::nullopt; // a stranger's datagram
  unsigned char expected[pulse_size];
  std::copy(p, p + body_size, expected);
  seal(expected, token);
  if (CRYPTO_memcmp(expected + body_size, p + body_size, mac_size) != 0)
    return std::nullopt; // forged, or another cluster's
  return fields{p[at_sender], static_cast<uint16_t>(get_le(p + at_gate, 2)),
                static_cast<uint16_t>(get_le(p + at_link, 2)),
                get_le(p + at_count, 8)};
}

} // namespace lumen::detail::pulse_wire
