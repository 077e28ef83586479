#define BOOST_TEST_MODULE gate
#include <boost/test/unit_test.hpp>

// The gate in one process: real sockets on loopback, a gate with short
// limits, and peers that behave, lie, dawdle or crowd.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <lumen/errors.hpp>

#include "gate.hpp"

namespace {

using namespace std::chrono;
using lumen::detail::address;
using lumen::detail::gate;
using lumen::detail::pass_gate;

/// A gate whose admitted sockets queue up for the test to take.
struct gate_fixture {
  explicit gate_fixture(lumen::detail::gate_limits limits = {})
    : g("127.0.0.1", 0, "s3cret", "test", limits) {
    g.open([this](int fd, const std::string&) {
      std::lock_guard<std::mutex> guard{mtx};
      admitted.push_back(fd);
      cv.notify_all();
    });
  }

  ~gate_fixture() {
    for (int fd : admitted)
      ::close(fd);
  }

  /// The next admitted socket; -1 if none comes within a second.
  int next_admitted() {
    std::unique_lock<std::mutex> guard{mtx};
    if (!cv.wait_for(guard, seconds(1), [this] { return !admitted.empty(); }))
      return -1;
    int fd = admitted.front();
    admitted.erase(admitted.begin());
    return fd;
  }

  address where() const {
    return {"127.0.0.1", g.port()};
  }

  gate g;
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<int> admitted;
};

int raw_connect(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  BOOST_REQUIRE(
    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  timeval tv{10, 0}; // no read below blocks for longer
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

/// Seconds until the gate closes `fd` (reads end, or the connection is
/// reset because the gate left bytes unread); -1 on a timeout.
double seconds_until_closed(int fd) {
  auto start = steady_clock::now();
  char buf[64];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET))
      return duration<double>(steady_clock::now() - start).count();
    if (n < 0)
      return -1;
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(gate_suite)

BOOST_AUTO_TEST_CASE(a_peer_with_the_token_is_admitted_and_keeps_its_bytes) {
  gate_fixture f;
  int client = pass_gate(f.where(), "s3cret", "the test gate", seconds(2));
  int served = f.next_admitted();
  BOOST_REQUIRE(served >= 0);
  // What the peer sends next reaches the protocol behind the gate whole.
  std::string msg = "first bytes after the gate";
  BOOST_REQUIRE(::send(client, msg.data(), msg.size(), 0) ==
                static_cast<ssize_t>(msg.size()));
  std::string got(msg.size(), '\0');
  BOOST_TEST(::recv(served, got.data(), got.size(), MSG_WAITALL) ==
             static_cast<ssize_t>(msg.size()));
  BOOST_TEST(got == msg);
  ::close(client);
}

BOOST_AUTO_TEST_CASE(a_wrong_token_is_refused_with_a_code_and_the_reason) {
  gate_fixture f;
  try {
    pass_gate(f.where(), "guess", "the test gate", seconds(2));
    BOOST_FAIL("a wrong token passed the gate");
  } catch (const lumen::error& e) {
    BOOST_TEST(static_cast<int>(e.code()) ==
               static_cast<int>(lumen::errc::wrong_token));
    BOOST_TEST(std::string{e.what()}.find("wrong cluster token") !=
               std::string::npos);
  }
  BOOST_TEST(f.next_admitted() == -1);
}

BOOST_AUTO_TEST_CASE(junk_is_dropped_without_an_answer) {
  gate_fixture f;
  int fd = raw_connect(f.g.port());
  std::string junk(4096, 'x');
  ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
  BOOST_TEST(seconds_until_closed(fd) >= 0);
  ::close(fd);
  BOOST_TEST(f.next_admitted() == -1);
}

BOOST_AUTO_TEST_CASE(a_peer_that_dawdles_is_dropped_at_the_deadline) {
  gate_fixture f{{milliseconds(300), 64}};
  int fd = raw_connect(f.g.port());
  // The right greeting, a byte at a time, too slowly to finish in time.
  std::string greeting = "LMNGATE1";
  bool closed = false;
  auto start = steady_clock::now();
  for (char c : greeting) {
    if (::send(fd, &c, 1, MSG_NOSIGNAL) != 1) {
      closed = true;
      break;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  BOOST_TEST((closed || seconds_until_closed(fd) >= 0));
  BOOST_TEST(duration<double>(steady_clock::now() - start).count() < 5.0);
  ::close(fd);
}

BOOST_AUTO_TEST_CASE(past_the_bound_the_oldest_handshake_makes_room) {
  gate_fixture f{{seconds(30), 4}};
  std::vector<int> silent;
  for (int i = 0; i < 4; ++i)
    silent.push_back(raw_connect(f.g.port()));
  // A prompt peer gets in although four dawdlers wait; the first of them,
  // the oldest, is dropped for it, long before the 30 s deadline.
  int client = pass_gate(f.where(), "s3cret", "the test gate", seconds(2));
  BOOST_TEST(f.next_admitted() >= 0);
  auto closed_after = seconds_until_closed(silent[0]);
  BOOST_TEST(closed_after >= 0);
  BOOST_TEST(closed_after < 10.0);
  // Three wait now; a fourth fills the gate and a fifth drops the next
  // oldest only.
  silent.push_back(raw_connect(f.g.port()));
  silent.push_back(raw_connect(f.g.port()));
  BOOST_TEST(seconds_until_closed(silent[1]) >= 0);
  pollfd p{silent[2], POLLIN, 0};
  BOOST_TEST(::poll(&p, 1, 200) == 0); // nothing: still waiting
  for (int fd : silent)
    ::close(fd);
  ::close(client);
}

BOOST_AUTO_TEST_CASE(nothing_listening_is_unreachable_with_the_address) {
  int port;
  {
    gate_fixture f;
    port = f.g.port();
  }
  try {
    pass_gate({"127.0.0.1", static_cast<uint16_t>(port)}, "s3cret", "the head",
              seconds(2));
    BOOST_FAIL("connected to a closed port");
  } catch (const lumen::error& e) {
    BOOST_TEST(static_cast<int>(e.code()) ==
               static_cast<int>(lumen::errc::unreachable));
    BOOST_TEST(std::string{e.what()}.find("the head at 127.0.0.1:") !=
                 std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(a_taken_port_is_a_clear_error) {
  gate_fixture f;
  try {
    gate second{"127.0.0.1", f.g.port(), "s3cret", "test"};
    BOOST_FAIL("two gates on one port");
  } catch (const lumen::usage_error& e) {
    BOOST_TEST(std::string{e.what()}.find("pick another --port") !=
                 std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
