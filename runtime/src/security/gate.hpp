#pragma once

// The gate: Lumen's own listener in front of both ports of a head or node.
// A peer shows the cluster token before a single byte of it reaches CAF's
// BASP parser (the control port) or the data plane (the data port), so a
// stranger can make a process allocate a few hundred bytes at most, and
// never holds a thread.
//
//   peer -> gate   "LMNGATE1", u16 token length (1..256), the token
//   gate -> peer   u8 verdict (0 admitted, 1 refused), u16 reason length,
//                  the reason (at most 256 bytes)
//
// Integers are little-endian. A refused peer hears why; junk is dropped
// without a word. The whole handshake has a deadline, and only so many
// handshakes wait at once: past that the one heard from longest ago is
// dropped to make room, TLS peers the gate answered only when no other is
// left, and peers that proved the cluster's secret never
// (handshake_queue.hpp), so that a crowd of strangers, silent or stalled,
// cannot keep out a peer making progress. All handshakes of a gate
// run on its one event-loop thread; an admitted socket is handed on, in
// blocking mode, to the protocol of its port.
//
// With TLS (tls.hpp) the same handshake runs inside a TLS session, and the
// socket is handed on with the session's record layer (gated_socket.hpp).
// A gate tells a TLS peer from a plain one by the first byte, so that
// either learns in a sentence that the cluster and it disagree.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "security/credentials.hpp"
#include "security/gated_socket.hpp"
#include "transport/address.hpp"

namespace lumen::detail {

struct gate_limits {
  /// How long a peer has for the whole handshake.
  std::chrono::milliseconds deadline{2000};
  /// Handshakes under way at once; a new one drops the least advanced
  /// heard from longest ago past that (handshake_queue.hpp).
  size_t max_pending = 128;
};

class gate {
public:
  /// Receives each admitted socket and the peer's address, on the gate's
  /// thread.
  using admit_fn = std::function<void(gated_socket, const std::string& peer)>;

  /// Listens on `host`:`port` (0: the OS picks); throws `error` naming the
  /// address and what to do. `what` names the port in the log ("control",
  /// "data").
  gate(const std::string& host, uint16_t port, credentials creds,
       std::string what, gate_limits limits = {});

  /// Closes the gate and joins its thread.
  ~gate();

  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;

  uint16_t port() const noexcept;

  /// The address it listens on (0.0.0.0 for all of them).
  const std::string& ip() const noexcept;

  /// What peers show to get in.
  const credentials& creds() const noexcept;

  /// Starts admitting peers; call once.
  void open(admit_fn admit);

  /// Stops accepting and drops the handshakes under way; links admitted
  /// already go on.
  void close();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The TCP ends of a link `pass_gate` made.
struct tcp_ends {
  std::string peer_ip;
  uint16_t local_port = 0;
};

/// Connects to the gate at `where` and shows the token, over TLS if
/// `creds` say so; returns the admitted socket in blocking mode. Throws
/// `error` with code `errc::unreachable` (nothing listens, or no answer
/// within `timeout`), `errc::wrong_token` or `errc::tls_mismatch`; its
/// message names `what` and the address. `ends`, if given, gets the link's
/// TCP ends.
gated_socket pass_gate(const address& where, const credentials& creds,
                       const std::string& what,
                       std::chrono::milliseconds timeout,
                       tcp_ends* ends = nullptr);

} // namespace lumen::detail
