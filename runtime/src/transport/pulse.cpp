#include "transport/pulse.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/network/multiplexer.hpp>

#include "core/log.hpp"
#include "transport/pulse_wire.hpp"

namespace lumen::detail {

namespace asio = boost::asio;
using udp = asio::ip::udp;
using boost::system::error_code;
using pulse_wire::from_admitting;
using pulse_wire::from_connecting;
using pulse_wire::pulse_size;
using std::chrono::steady_clock;

namespace {

/// How long a new link may go without its first pulse: before the log
/// says that pulses do not arrive, or, where they come from its peer's
/// host or gate on other links, before its peer is taken for stopped
/// (which its handshake, held up by a busy peer, may take a while).
constexpr auto first_pulse_grace = std::chrono::seconds(3);

/// A tick this much later than due means this process was not running (a
/// SIGSTOP, a suspended machine): its peers' silence meanwhile is its own.
constexpr auto paused = std::chrono::milliseconds(500);

std::atomic<pulse_service*> current{nullptr};

/// Identifies a socket for its lifetime, where its descriptor's number is
/// reused once closed; 0 if `fd` is no socket.
uint64_t cookie_of(int fd) {
  uint64_t cookie = 0;
  socklen_t len = sizeof cookie;
  if (::getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0)
    return 0;
  return cookie;
}

} // namespace

struct pulse_service::impl {
  /// A socket pulses leave from and arrive at, with its receive buffer.
  struct ear {
    explicit ear(asio::io_context& io)
      : sock(io) {}
    udp::socket sock;
    uint16_t port = 0; // a gate's: the one its pulses are meant for
    std::array<unsigned char, 2 * pulse_size> buf{}; // longer ones: junk
    udp::endpoint from;
  };

  struct link {
    int fd;
    uint64_t cookie;
    uint8_t hears; // the sender byte of the peer's pulses
    uint16_t link_port;
    std::string peer_ip;
    uint16_t gate_port; // links this side connected: the peer's gate
    std::string label;
    std::optional<udp::endpoint> to;
    ear* via = nullptr;
    steady_clock::time_point since;
    steady_clock::time_point heard{};
    bool heard_once = false;
    bool said_unheard = false;
    uint64_t last_count = 0;
  };

  impl(caf::actor_system& s, std::string t)
    : sys(s)
    , token(std::move(t)) {}

  caf::actor_system& sys;
  std::string token;
  asio::io_context io;
  asio::steady_timer timer{io};
  std::unique_ptr<ear> out4, out6; // links this side connected
  std::vector<std::unique_ptr<ear>> gates;
  mutable std::mutex mtx; // links: the loop changes them, heard_from reads
  std::vector<link> links;
  // Where pulses came from (`heard_where`): a link to there never heard
  // from is a peer that stopped before its first pulse, not UDP filtered
  // on the way.
  std::set<std::string> heard;
  uint64_t count = 0;
  std::atomic<bool> said_no_cookies{false};
  steady_clock::time_point due;
  log_budget log;
  std::thread loop;

  /// What pulses must have come from for `l`'s to be expected: the peer's
  /// gate (UDP there might be taken, or filtered) for a link this side
  /// connected; the peer's host for one it admitted (the pulses of every
  /// process there leave from sockets of their own).
  static std::string heard_where(const link& l) {
    return l.hears == from_admitting
             ? l.peer_ip + ":" + std::to_string(l.gate_port)
             : l.peer_ip;
  }

  void listen_on(ear& e) {
    e.sock.async_receive_from(
      asio::buffer(e.buf), e.from, [this, &e](error_code ec, size_t n) {
        if (ec == asio::error::operation_aborted || !e.sock.is_open())
          return;
        if (!ec && n == pulse_size)
          hear(e);
        listen_on(e);
      });
  }

  ear& sender_for(const udp::endpoint& to) {
    auto& e = to.address().is_v6() ? out6 : out4;
    if (!e) {
      e = std::make_unique<ear>(io);
      error_code ec;
      e->sock.open(to.protocol(), ec);
      if (!ec)
        e->sock.bind(udp::endpoint{to.protocol(), 0}, ec);
      if (!ec)
        e->sock.non_blocking(true, ec);
      if (ec) {
        log.say("cannot send pulses (" + ec.message() +
                "): a peer of this process that stops is noticed only "
                "after " +
                std::to_string(backstop.count()) + " s");
        e->sock.close(ec);
      } else {
        listen_on(*e);
      }
    }
    return *e;
  }

  void hear(ear& e) {
    auto f = pulse_wire::read(e.buf.data(), token);
    if (!f)
      return;
    auto [sender, gate, port, n] = *f;
    auto ip = e.from.address().to_string();
    std::lock_guard<std::mutex> guard{mtx};
    // The link the pulse names: by the gate it was meant for (one sent to
    // another gate is a replay), the connecting side's TCP port and the
    // sender's IP. An admitting side may answer from another address of
    // its host, so a link this side connected takes an answer from any,
    // if no other link of that gate has the same port.
    link* found = nullptr;
    int candidates = 0;
    for (auto& l : links) {
      bool ours = sender == from_admitting
                    ? l.hears == sender && l.gate_port == e.from.port() &&
                        l.gate_port == gate
                    : l.hears == sender && l.peer_ip == ip && e.port == gate;
      if (!ours || l.link_port != port)
        continue;
      ++candidates;
      if (!found || l.peer_ip == ip)
        found = &l;
    }
    if (!found || (candidates > 1 && found->peer_ip != ip) ||
        n <= found->last_count)
      return;
    found->last_count = n;
    found->heard = steady_clock::now();
    found->heard_once = true;
    heard.insert(heard_where(*found));
    if (sender == from_connecting) {
      found->to = e.from;
      found->via = &e;
    }
  }

  void send(link& l) {
    bool connected = l.hears == from_admitting;
    auto d = pulse_wire::write({connected ? from_connecting : from_admitting,
                                connected ? l.gate_port : l.via->port,
                                l.link_port, ++count},
                               token);
    error_code ec; // a pulse lost is what pulses are for
    l.via->sock.send_to(asio::buffer(d), *l.to, 0, ec);
  }

  /// Shuts the link's socket down on CAF's own loop, which alone closes
  /// it: there the descriptor is still the link's if its cookie is.
  void close(const link& l) {
    log.say("no pulse from " + l.label + " for " +
            std::to_string(silence.count()) +
            " ms (its process is stopped or its host unreachable): "
            "closing the link, its node is down");
    sys.middleman().backend().post([fd = l.fd, cookie = l.cookie] {
      if (cookie_of(fd) == cookie)
        ::shutdown(fd, SHUT_RDWR);
    });
  }

  void tick() {
    auto now = steady_clock::now();
    bool was_paused = now - due > paused;
    due = now + interval;
    {
      std::lock_guard<std::mutex> guard{mtx};
      for (auto it = links.begin(); it != links.end();) {
        auto& l = *it;
        if (cookie_of(l.fd) != l.cookie) { // CAF closed it
          it = links.erase(it);
          continue;
        }
        if (was_paused)
          l.heard = l.since = now;
        if (l.to)
          send(l);
        bool judged = l.heard_once || heard.count(heard_where(l)) > 0;
        if (judged && (l.heard_once ? now - l.heard > silence
                                    : now - l.since > first_pulse_grace)) {
          close(l);
          it = links.erase(it);
          continue;
        }
        if (!judged && !l.said_unheard && now - l.since > first_pulse_grace) {
          l.said_unheard = true;
          log.say("no pulse has come from " + l.label + " in " +
                  std::to_string(first_pulse_grace.count()) +
                  " s (is UDP between the hosts filtered?): this link's "
                  "loss is noticed only after " +
                  std::to_string(backstop.count()) + " s");
        }
        ++it;
      }
    }
    timer.expires_at(due);
    timer.async_wait([this](error_code ec) {
      if (!ec)
        tick();
    });
  }

  /// Watches `l` from the loop, once `ready` (there) made it whole.
  template <class Ready>
  void add(link l, Ready ready) {
    // Taken now, while the descriptor is surely still the link's.
    l.cookie = cookie_of(l.fd);
    if (l.cookie == 0) {
      // Without cookies a closed link's number, reused, could not be told
      // from it: such a kernel's links are left to CAF's timeout.
      if (!said_no_cookies.exchange(true))
        log_line("this kernel gives sockets no cookies (SO_COOKIE): a peer "
                 "of this process that stops is noticed only after " +
                 std::to_string(backstop.count()) + " s");
      return;
    }
    l.since = steady_clock::now();
    asio::post(io, [this, l = std::move(l), ready]() mutable {
      ready(l);
      std::lock_guard<std::mutex> guard{mtx};
      links.push_back(std::move(l));
    });
  }
};

pulse_service::pulse_service(caf::actor_system& sys, const std::string& token)
  : impl_(std::make_unique<impl>(sys, token)) {
  impl_->due = steady_clock::now();
  asio::post(impl_->io, [this] { impl_->tick(); });
  impl_->loop = std::thread{[this] { impl_->io.run(); }};
  current = this;
}

pulse_service::~pulse_service() {
  pulse_service* self = this;
  current.compare_exchange_strong(self, nullptr);
  impl_->io.stop();
  impl_->loop.join();
}

pulse_service* pulse_service::of_this_process() {
  return current;
}

void pulse_service::listen(const std::string& ip, uint16_t port) {
  error_code ec;
  auto addr = asio::ip::make_address(ip, ec);
  auto e = std::make_unique<impl::ear>(impl_->io);
  e->port = port;
  udp::endpoint at{addr, port};
  if (!ec)
    e->sock.open(at.protocol(), ec);
  if (!ec)
    e->sock.bind(at, ec);
  if (!ec)
    e->sock.non_blocking(true, ec);
  if (ec) {
    log_line("cannot hear pulses on UDP " + ip + ":" + std::to_string(port) +
             " (" + ec.message() +
             "): a peer of this process that stops is "
             "noticed only after " +
             std::to_string(backstop.count()) + " s");
    return;
  }
  asio::post(impl_->io, [this, e = std::move(e)]() mutable {
    impl_->listen_on(*e);
    impl_->gates.push_back(std::move(e));
  });
}

void pulse_service::watch_connected(int fd, const address& where,
                                    const std::string& peer_ip,
                                    uint16_t local_port) {
  error_code ec;
  auto addr = asio::ip::make_address(peer_ip, ec);
  if (ec)
    return;
  impl::link l{};
  l.fd = fd;
  l.hears = from_admitting;
  l.link_port = local_port;
  l.peer_ip = addr.to_string();
  l.gate_port = where.port;
  l.label = where.to_string();
  l.to = udp::endpoint{addr, where.port};
  impl_->add(std::move(l),
             [this](impl::link& x) { x.via = &impl_->sender_for(*x.to); });
}

void pulse_service::watch_admitted(int fd, const std::string& peer) {
  auto colon = peer.rfind(':');
  unsigned port = 0;
  if (colon == std::string::npos ||
      std::from_chars(peer.data() + colon + 1, peer.data() + peer.size(), port)
          .ec != std::errc{} ||
      port > 65535)
    return; // "an unknown address": the gate could not tell
  impl::link l{};
  l.fd = fd;
  l.hears = from_connecting;
  l.link_port = static_cast<uint16_t>(port);
  l.peer_ip = peer.substr(0, colon);
  l.label = peer;
  impl_->add(std::move(l), [](impl::link&) {});
}

bool pulse_service::heard_from(const address& where,
                               std::chrono::milliseconds within) const {
  auto label = where.to_string();
  auto now = steady_clock::now();
  std::lock_guard<std::mutex> guard{impl_->mtx};
  return std::any_of(impl_->links.begin(), impl_->links.end(),
                     [&](const impl::link& l) {
                       return l.hears == from_admitting && l.label == label &&
                              l.heard_once && now - l.heard <= within;
                     });
}

} // namespace lumen::detail
