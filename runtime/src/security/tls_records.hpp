#pragma once

// TLS 1.3's record layer, run by Lumen once OpenSSL has done the handshake
// (tls.hpp). An OpenSSL session may not be used by two threads at once, and
// a link has two: its reader, blocked in a read, and whoever sends. The two
// directions of a TLS 1.3 session share nothing but the handshake, so each
// gets its own cipher state here, sealed on the sending thread and opened
// on the reading one, in records of 16 KiB (TLS's largest) written and read
// many at a time: no relay thread, no extra copy, no lock between them.
// The wire stays standard TLS 1.3 application data.
//
// Both ends start counting records right after the handshake; the server
// sends no session tickets (tls.cpp), so nothing else is counted. A record
// that does not open (tampered, replayed, out of order) ends the link; so
// do padding, key updates and tickets, which no Lumen peer sends.

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lumen::detail {

/// One direction's keys: what the handshake's traffic secret gives.
struct tls_traffic_key {
  /// The suite's AEAD (an `EVP_CIPHER*`): AES-128-GCM, AES-256-GCM or
  /// ChaCha20-Poly1305.
  const void* cipher = nullptr;
  std::array<unsigned char, 32> key{};
  std::array<unsigned char, 12> iv{};
};

class tls_records {
public:
  tls_records(const tls_traffic_key& sending, const tls_traffic_key& reading);
  ~tls_records();

  tls_records(const tls_records&) = delete;
  tls_records& operator=(const tls_records&) = delete;

  // Sending, one thread at a time.

  /// Seals all of `iov` (advancing it) and writes the records to `fd`, a
  /// blocking socket; false if the peer is gone, or the link sealed all
  /// the records its key may (RFC 8446, 5.5).
  bool write(int fd, iovec* iov, int count);

  /// Appends `n` bytes at `data`, sealed, to `out`; false as `write`.
  bool seal(const char* data, size_t n, std::vector<char>& out);

  // Reading, one thread at a time.

  /// Reads exactly `n` bytes of plaintext from `fd`, a blocking socket
  /// (its receive timeout holds); false on EOF, error, or a record that
  /// does not open.
  bool read(int fd, void* data, size_t n);

  /// For an event loop: where bytes read from the socket go (at least a
  /// record's room), then how many came.
  iovec raw_space();
  void raw_came(size_t n);

  /// Copies up to `n` bytes of plaintext to `at` from what came; 0 when a
  /// whole record has yet to come, or when `failed()`.
  size_t take(char* at, size_t n);

  /// The link is over: the peer ended it (close_notify), or sent what does
  /// not open (`why()` says what).
  bool failed() const noexcept {
    return !why_.empty();
  }
  const std::string& why() const noexcept {
    return why_;
  }

  /// The alert that ended the link (RFC 8446, 6): 0 for the peer's
  /// close_notify, or none.
  int alert() const noexcept {
    return alert_;
  }

private:
  struct direction;

  /// Seals the next record's worth of `iov` (advancing it) at `out`, which
  /// has room for a record; returns the record's size.
  static size_t seal_record(direction& d, iovec*& iov, int& count, char* out);
  bool fill(int fd);
  void compact();

  std::unique_ptr<direction> out_;
  std::unique_ptr<direction> in_;
  std::vector<char> sealed_; // records on their way out
  // What came in: [plain_at_, plain_end_) opened and not yet taken, then
  // [raw_at_, raw_end_) not yet opened.
  std::vector<char> raw_;
  size_t plain_at_ = 0, plain_end_ = 0, raw_at_ = 0, raw_end_ = 0;
  std::string why_;
  int alert_ = 0;
};

} // namespace lumen::detail
