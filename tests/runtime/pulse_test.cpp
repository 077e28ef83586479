#define BOOST_TEST_MODULE pulse
#include <boost/test/unit_test.hpp>

// The liveness pulses of control links (transport/pulse.hpp), on loopback:
// a link whose peer pulses stays open however quiet it is; one whose peer
// stopped is closed; replayed and forged pulses keep nothing alive. The
// links are real TCP connections; the service closes one with shutdown,
// which its peer reads as the end of the stream.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "transport/pulse.hpp"
#include "transport/pulse_wire.hpp"

namespace {

using namespace std::chrono;
using lumen::detail::address;
using lumen::detail::pulse_service;

const std::string token = "pulse-test-token";

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  return a;
}

uint16_t port_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

/// A UDP socket on a free loopback port.
int udp_socket() {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  auto a = loopback(0);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  return fd;
}

/// The two ends of a TCP connection on loopback: what a control link is
/// to the service.
struct tcp_pair {
  int connected = -1;
  int admitted = -1;
  tcp_pair() {
    int l = ::socket(AF_INET, SOCK_STREAM, 0);
    auto a = loopback(0);
    ::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(l, 1);
    auto at = loopback(port_of(l));
    connected = ::socket(AF_INET, SOCK_STREAM, 0);
    ::connect(connected, reinterpret_cast<sockaddr*>(&at), sizeof at);
    admitted = ::accept(l, nullptr, nullptr);
    ::close(l);
  }
  ~tcp_pair() {
    ::close(connected);
    ::close(admitted);
  }
  std::string connected_end() const {
    return "127.0.0.1:" + std::to_string(port_of(connected));
  }
};

/// True once `fd` reads the end of the stream within `limit`.
bool ended_within(int fd, milliseconds limit) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(limit.count())) != 1)
    return false;
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

struct system_fixture {
  system_fixture() {
    cfg.load<caf::io::middleman>();
    sys = std::make_unique<caf::actor_system>(cfg);
  }
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(pulse, system_fixture)

BOOST_AUTO_TEST_CASE(a_quiet_link_stays_open_and_a_stopped_peers_is_closed) {
  tcp_pair link;
  int gate = udp_socket(); // a free port number, for the service's gate
  auto gate_port = port_of(gate);
  ::close(gate);
  auto admitting = std::make_unique<pulse_service>(*sys, token);
  admitting->listen("127.0.0.1", gate_port);
  auto connecting = std::make_unique<pulse_service>(*sys, token);
  address where{"127.0.0.1", gate_port};
  connecting->watch_connected(link.connected, where, "127.0.0.1",
                              port_of(link.connected));
  admitting->watch_admitted(link.admitted, link.connected_end());
  auto start = steady_clock::now();
  while (!connecting->heard_from(where, milliseconds(200)) &&
         steady_clock::now() - start < seconds(2))
    std::this_thread::sleep_for(milliseconds(20));
  BOOST_TEST(connecting->heard_from(where, milliseconds(200)));
  // Quiet for twice the silence that ends a link: nothing is sent on the
  // link itself, and it stays open at both ends.
  BOOST_TEST(!ended_within(link.admitted, 2 * pulse_service::silence));
  BOOST_TEST(!ended_within(link.connected, milliseconds(1)));
  // The connecting side stops; the admitting side closes its end.
  connecting.reset();
  auto stopped = steady_clock::now();
  BOOST_TEST(ended_within(link.connected, seconds(3)));
  auto took = duration<double>(steady_clock::now() - stopped).count();
  BOOST_TEST(took >= 1.0);
  BOOST_TEST(took < 2.5);
}

BOOST_AUTO_TEST_CASE(replayed_and_forged_pulses_keep_nothing_alive) {
  // A real pulse, caught where the gate will be.
  tcp_pair link;
  int catcher = udp_socket();
  auto gate_port = port_of(catcher);
  timeval tv{2, 0};
  ::setsockopt(catcher, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::vector<char> caught(64);
  {
    pulse_service sender{*sys, token};
    sender.watch_connected(link.connected, {"127.0.0.1", gate_port},
                           "127.0.0.1", port_of(link.connected));
    auto n = ::recv(catcher, caught.data(), caught.size(), 0);
    BOOST_REQUIRE(n > 0);
    caught.resize(size_t(n));
  }
  ::close(catcher);
  // A later count with the caught MAC: not the token's.
  auto forged = caught;
  auto& count = forged[lumen::detail::pulse_wire::at_count];
  count = static_cast<char>(count + 1);
  // The admitting side hears it once, then only it again and forgeries:
  // its peer fell silent, and the link closes as if nothing came.
  pulse_service receiver{*sys, token};
  receiver.listen("127.0.0.1", gate_port);
  receiver.watch_admitted(link.admitted, link.connected_end());
  std::this_thread::sleep_for(milliseconds(200)); // watching and listening
  int replayer = udp_socket();
  auto to = loopback(gate_port);
  auto send = [&](const std::vector<char>& d) {
    ::sendto(replayer, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to),
             sizeof to);
  };
  send(caught);
  auto first = steady_clock::now();
  bool ended = false;
  while (!ended && steady_clock::now() - first < seconds(4)) {
    send(caught);
    send(forged);
    ended = ended_within(link.connected, milliseconds(50));
  }
  ::close(replayer);
  BOOST_TEST(ended);
  BOOST_TEST(duration<double>(steady_clock::now() - first).count() < 2.5);
}

BOOST_AUTO_TEST_SUITE_END()
