#pragma once

// The gate's insides (gate.hpp): its event loop, acceptor and the
// handshakes under way, shared by the gate (gate.cpp) and the handshake a
// peer goes through (gate_handshake.cpp).

#include <memory>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/log.hpp"
#include "security/gate.hpp"
#include "security/handshake_queue.hpp"

namespace lumen::detail {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct gate::impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer backoff{io};
  credentials creds;
  std::string what;
  uint16_t port = 0; // kept: the acceptor forgets it once closed
  std::string ip;
  bool closed = false;
  gate_limits limits;
  admit_fn admit;
  log_budget log;
  class handshake;
  using queue = handshake_queue<std::weak_ptr<handshake>>;
  queue under_way;
  std::thread loop;

  void accept();
  void stop_accepting();

  /// Starts the handshake of peer `s`, which connected (in
  /// gate_handshake.cpp, with the handshake).
  void start_handshake(tcp::socket s);

  /// Ends `h` (`verdict`: "dropped", or "refused" with a word to the
  /// peer) for `why`, and logs it.
  static void drop_handshake(handshake& h, const char* verdict,
                             const std::string& why);
};

} // namespace lumen::detail
