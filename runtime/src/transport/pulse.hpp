#pragma once

// Whether the process at the other end of a control link is alive, told by
// small UDP datagrams (pulses) beside the link, 10 a second each way.
//
// CAF's heartbeats ride on the link's TCP stream, and CAF counts a peer
// heard only when a whole message arrived: a message of hundreds of MB on
// a link shared with bulk transfers, or a segment lost and retransmitted
// with exponential backoff, holds everything behind it for seconds, and a
// live node was given up for dead in the middle of a 100M-parameter step.
// Pulses travel apart from the stream and are never retransmitted, so each
// is a fresh try: a dozen in a row must be lost before a live peer looks
// dead, while a stopped process or a cut link sends none at all. A link
// whose peer sent no pulse for `silence` (since it was made, if none came
// yet but pulses did from the peer's host) is shut down, and CAF tells
// everyone its node went down as it would of a closed socket; CAF's own
// timeout stays as a backstop (`backstop`) for links whose pulses never
// arrive (UDP filtered between the hosts: said in the log once).
//
//   pulse   "LMNPULS1", u8 sender (0 the side that connected, 1 the side
//           that admitted it), u16 the admitting side's gate port, u16
//           the connecting side's TCP port of the link (with the sender's
//           IP, names the link at both ends), u64 a count that only grows,
//           16 bytes of HMAC-SHA256 of the rest keyed by the cluster token
//
// A side that admitted links hears pulses on its control gate's address
// (UDP, the same port number) and answers to where they came from; a side
// that connected sends from a socket of its own. Datagrams that do not
// carry the token's MAC, were meant for another gate or repeat a count
// are ignored.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>

#include "transport/address.hpp"

namespace lumen::detail {

class pulse_service {
public:
  static constexpr auto interval = std::chrono::milliseconds(100);
  static constexpr auto silence = std::chrono::milliseconds(1200);
  static constexpr auto backstop = std::chrono::seconds(30);

  /// Pulses for the control links of `sys`, keyed by `token`; one per
  /// process (`of_this_process`).
  pulse_service(caf::actor_system& sys, const std::string& token);
  ~pulse_service();

  pulse_service(const pulse_service&) = delete;
  pulse_service& operator=(const pulse_service&) = delete;

  /// The process's service, or null (no networked runtime).
  static pulse_service* of_this_process();

  /// Hears pulses on `ip`:`port` (UDP), where this process's control gate
  /// listens (TCP); says in the log if it cannot.
  void listen(const std::string& ip, uint16_t port);

  /// A link this process connected to the gate at `where` (IP `peer_ip`)
  /// from TCP port `local_port`; `fd` is CAF's socket for it.
  void watch_connected(int fd, const address& where, const std::string& peer_ip,
                       uint16_t local_port);

  /// A link a control gate of this process admitted from `peer` (the TCP
  /// end's IP:PORT); `fd` is CAF's socket for it.
  void watch_admitted(int fd, const std::string& peer);

  /// True if a pulse came within `within` over a link this process
  /// connected to the gate at `where`.
  bool heard_from(const address& where, std::chrono::milliseconds within) const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace lumen::detail
