#pragma once

// TLS 1.3 for the links between a cluster's processes (`--tls`).
//
// Neither CAF's middleman nor the data plane speaks TLS itself: each link's
// TLS session lives in an event loop that relays its plaintext to one end
// of a local socket pair, and CAF or the data plane gets the other end as
// if it were the TCP socket. So both planes are encrypted by one piece of
// code, and neither learns anything new.
//
// Keys: with certificate files, both sides show a certificate and check
// the peer's against the CA (no host names: the CA is the cluster's own).
// Without, both derive a pre-shared key from the cluster token; a peer
// without the token cannot finish the handshake, and the token itself
// never crosses the wire.

#include <array>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>

#include "lumen/init.hpp"

namespace lumen::detail {

using tls_stream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;

/// How a client handshake ended: a plaintext socket, or why not.
struct tls_outcome {
  int fd = -1;
  std::string why;
  /// Keys or certificates did not match: the peer rejected this
  /// process's, or this process the peer's.
  bool refused = false;
};

class tls_context {
public:
  /// From resolved options (`enabled` set) and the cluster token; throws
  /// `usage_error` (`errc::tls_mismatch`) naming a file it cannot use.
  tls_context(const tls_options& opts, const std::string& token);

  /// Stops the client relays (their links close) and joins their thread.
  ~tls_context();

  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  /// For the gate's side of each handshake.
  boost::asio::ssl::context& server() noexcept {
    return server_;
  }

  /// Runs the client side of the handshake on `fd` (a connected TCP
  /// socket, which it takes) until `deadline`; on success relays the link
  /// on this context's thread and returns the plaintext end, blocking.
  tls_outcome connect(int fd, std::chrono::steady_clock::time_point deadline);

  bool uses_certificates() const noexcept {
    return certificates_;
  }

private:
  /// On the loop: starts the handshake on `fd` and sets `done` when it
  /// ends; `owned` once the TLS stream holds (and will close) `fd`.
  void start_client(int fd, std::chrono::steady_clock::time_point deadline,
                    std::promise<tls_outcome>& done, bool& owned);

  bool certificates_;
  std::array<unsigned char, 32> psk_{};
  boost::asio::ssl::context server_;
  boost::asio::ssl::context client_;
  boost::asio::io_context io_;
  std::thread loop_;
};

/// Relays between `tls` (handshake done) and a fresh local socket pair, on
/// `tls`'s event loop, until either side ends; returns the pair's other end
/// in blocking mode, or -1 (out of descriptors).
int relay(tls_stream tls);

/// The first byte of a TLS handshake record: how a gate tells a TLS peer
/// from a plain one.
inline constexpr unsigned char tls_handshake_byte = 0x16;

} // namespace lumen::detail
