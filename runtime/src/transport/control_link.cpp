#include "transport/control_link.hpp"

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp_broker.hpp>

#include "lumen/errors.hpp"

#include "core/log.hpp"
#include "security/tls.hpp"
#include "transport/protocol.hpp"
#include "transport/pulse.hpp"

namespace lumen::detail {

namespace {

// How long a peer may take to answer, from connect to BASP handshake.
constexpr auto handshake_timeout = std::chrono::seconds(5);

caf::actor basp_broker(caf::actor_system& sys) {
  return sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
}

} // namespace

std::string say_hello(caf::actor_system& sys, const caf::actor& peer,
                      const std::string& role, const std::string& what) {
  caf::scoped_actor self{sys};
  std::string id;
  self
    ->request(peer, handshake_timeout, hello_atom::value, role, std::string{},
              uint16_t{0}, uint16_t{0}, std::map<std::string, std::string>{},
              std::string{}, uint64_t{0})
    .receive([&](std::string& x, uint64_t) { id = std::move(x); },
             [&](caf::error& err) {
               throw_control_error(sys, err, what + " did not answer",
                                   errc::unreachable);
             });
  return id;
}

void serve_control(caf::actor_system& sys, caf::actor published, gate& g) {
  auto broker = basp_broker(sys);
  auto port = g.port();
  auto whom = caf::actor_cast<caf::strong_actor_ptr>(published);
  auto* pulses = pulse_service::of_this_process();
  if (pulses)
    pulses->listen(g.ip(), port);
  g.open([&sys, broker, port, whom, pulses,
          tls = g.creds().tls](gated_socket link, const std::string& peer) {
    // CAF's broker takes a socket: a TLS link's plaintext comes through a
    // relay.
    int fd = as_plain_socket(std::move(link), tls.get());
    if (fd < 0)
      return log_line("lost a control connection from " + peer +
                      ": could not relay its TLS link (out of descriptors "
                      "or memory)");
    if (pulses)
      pulses->watch_admitted(fd, peer);
    // The broker's handler for a ready-made connection: it writes the
    // server handshake naming `whom` and reads BASP from then on.
    caf::anon_send(broker, caf::publish_atom::value,
                   sys.middleman().backend().new_scribe(fd), port, whom,
                   std::set<std::string>{});
  });
}

caf::actor connect_control(caf::actor_system& sys, const address& where,
                           const credentials& creds, const std::string& what,
                           std::chrono::milliseconds timeout) {
  auto refused = [&](const std::string& failure) {
    return error("cannot reach " + what + " at " + where.to_string() +
                   ": it let this process in but did not complete the "
                   "control handshake" +
                   (failure.empty() ? std::string{} : " (" + failure + ")"),
                 errc::unreachable);
  };
  // CAF 0.17's broker dates a connection it opens at the epoch until the
  // first bytes are read, so a heartbeat tick handled before that read
  // closes it as timed out. Waiting until the peer's handshake (written
  // unasked) is readable narrows the window to the broker's own queue,
  // which a loaded machine still hits now and then: the race, never the
  // peer, is behind such a timeout, so a fresh connection is tried.
  constexpr int attempts = 3;
  for (int attempt = 1;; ++attempt) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    tcp_ends ends;
    int fd = as_plain_socket(pass_gate(where, creds, what, timeout, &ends),
                             creds.tls.get());
    if (fd < 0)
      throw error("cannot reach " + what + " at " + where.to_string() +
                    ": could not relay its TLS link (out of descriptors or "
                    "memory)",
                  errc::unreachable);
    // Watched from before CAF owns the socket, whose number it may reuse
    // (a link that fails here is closed, and no longer watched), and
    // before the peer's handshake: its side watches from its gate on.
    if (auto* pulses = pulse_service::of_this_process())
      pulses->watch_connected(fd, where, ends.peer_ip, ends.local_port);
    pollfd readable{fd, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (::poll(&readable, 1,
               static_cast<int>(std::max<long>(0, left.count()))) != 1) {
      ::close(fd);
      throw refused("no handshake within " + std::to_string(timeout.count()) +
                    " ms");
    }
    caf::actor peer;
    caf::error failure;
    caf::scoped_actor self{sys};
    self
      ->request(basp_broker(sys), timeout, caf::connect_atom::value,
                sys.middleman().backend().new_scribe(fd), where.port)
      .receive(
        [&](caf::node_id&, caf::strong_actor_ptr& whom,
            std::set<std::string>&) {
          peer = caf::actor_cast<caf::actor>(whom);
        },
        [&](caf::error& err) { failure = std::move(err); });
    if (peer)
      return peer;
    if (failure != caf::sec::connection_timeout || attempt == attempts)
      throw refused(failure ? sys.render(failure) : std::string{});
  }
}

} // namespace lumen::detail
