#pragma once

// TLS 1.3 for the links between a cluster's processes (`--tls`).
//
// OpenSSL does each link's handshake; then Lumen's own record layer
// (tls_records.hpp) seals and opens the link's bytes on the threads that
// send and read them: the data plane and channels encrypt on their own
// threads, at the speed of the cipher. CAF's middleman, which only takes a
// socket, gets the plaintext end of a local socket pair instead, relayed on
// this context's event loop (control traffic: small).
//
// Keys: with certificate files, both sides show a certificate and check
// the peer's against the CA (no host names: the CA is the cluster's own).
// Without, both derive a pre-shared key from the cluster token; a peer
// without the token cannot finish the handshake, and the token itself
// never crosses the wire.

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "lumen/init.hpp"

#include "security/gated_socket.hpp"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace lumen::detail {

/// How a client handshake ended: the link's records, or why not.
struct tls_outcome {
  std::unique_ptr<tls_records> records;
  std::string why;
  /// Keys or certificates did not match: the peer rejected this
  /// process's, or this process the peer's.
  bool refused = false;
};

class tls_context;

/// One side of a handshake on a socket it does not own: blocking (the
/// client's, run to the end by `tls_context::connect`) or not (the gate's,
/// stepped by its event loop as the socket gets ready).
class tls_handshake {
public:
  tls_handshake(tls_context& ctx, int fd, bool server);
  ~tls_handshake();

  tls_handshake(const tls_handshake&) = delete;
  tls_handshake& operator=(const tls_handshake&) = delete;

  enum class state { done, wants_read, wants_write, failed };

  /// Goes as far as the socket lets it.
  state step();

  /// After `done`: the link's record layer, keyed by the handshake's
  /// traffic secrets; throws `error` for a suite it does not know.
  std::unique_ptr<tls_records> records();

  /// After `failed`: why, for a log line or an error.
  const std::string& why() const noexcept {
    return why_;
  }
  /// After `failed`: keys or certificates did not match.
  bool refused() const noexcept {
    return refused_;
  }

  /// For watching the handshake's bytes (OpenSSL's BIO callbacks).
  SSL* native() const noexcept {
    return ssl_;
  }

  struct secrets;

  /// OpenSSL's keylog callback: keeps the traffic secrets for `records()`.
  static void keep_secret(const SSL* ssl, const char* line);

private:
  SSL* ssl_;
  bool server_;
  std::unique_ptr<secrets> secrets_;
  std::string why_;
  bool refused_ = false;
};

class tls_context {
public:
  /// From resolved options (`enabled` set) and the cluster token; throws
  /// `usage_error` (`errc::tls_mismatch`) naming a file it cannot use.
  tls_context(const tls_options& opts, const std::string& token);

  /// Stops the relays (their links close) and joins their thread.
  ~tls_context();

  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  /// Runs the client side of the handshake on `fd` (a connected TCP
  /// socket in blocking mode, still the caller's) until `deadline`.
  tls_outcome connect(int fd, std::chrono::steady_clock::time_point deadline);

  /// Relays `s`'s plaintext to a fresh local socket pair on this context's
  /// thread until either side ends; returns the pair's other end in
  /// blocking mode, or -1 (out of descriptors). The relay owns `s.fd`.
  int relay(gated_socket s);

  bool uses_certificates() const noexcept {
    return certificates_;
  }

private:
  friend class tls_handshake;

  bool certificates_;
  std::array<unsigned char, 32> psk_{};
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> server_;
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> client_;
  boost::asio::io_context io_;
  std::thread loop_;
};

/// A plain socket or, with TLS, the plaintext end of its relay: for code
/// that only takes a socket (CAF's middleman). -1 if out of descriptors.
int as_plain_socket(gated_socket s, tls_context* tls);

/// What OpenSSL last said went wrong on this thread.
std::string openssl_error();

/// The first byte of a TLS handshake record: how a gate tells a TLS peer
/// from a plain one.
inline constexpr unsigned char tls_handshake_byte = 0x16;

} // namespace lumen::detail
