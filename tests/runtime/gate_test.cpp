#define BOOST_TEST_MODULE gate
#include <boost/test/unit_test.hpp>

// The gate in one process: real sockets on loopback, a gate with short
// limits, and peers that behave, lie, dawdle or crowd.

#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <lumen/errors.hpp>
#include <lumen/util/spin.hpp>

#include "certificates.hpp"
#include "security/gate.hpp"
#include "security/gate_wire.hpp"
#include "security/handshake_queue.hpp"
#include "wiretap.hpp"

namespace {

using namespace std::chrono;
using lumen::detail::address;
using lumen::detail::credentials;
using lumen::detail::gate;
using lumen::detail::gated_socket;
using lumen::detail::pass_gate;
using lumen::test::self_signed;
using lumen::test::wiretap;

credentials plain(const std::string& token) {
  return {token, nullptr};
}

/// A gate whose admitted sockets queue up for the test to take.
struct gate_fixture {
  explicit gate_fixture(lumen::detail::gate_limits limits = {},
                        credentials creds = plain("s3cret"))
    : g("127.0.0.1", 0, std::move(creds), "test", limits) {
    g.open([this](gated_socket s, const std::string&) {
      std::lock_guard<std::mutex> guard{mtx};
      admitted.push_back(std::move(s));
      cv.notify_all();
    });
  }

  /// The next admitted socket; fd -1 if none comes within a second.
  gated_socket next_admitted() {
    std::unique_lock<std::mutex> guard{mtx};
    if (!cv.wait_for(guard, seconds(1), [this] { return !admitted.empty(); }))
      return {};
    auto s = std::move(admitted.front());
    admitted.erase(admitted.begin());
    return s;
  }

  address where() const {
    return {"127.0.0.1", g.port()};
  }

  gate g;
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<gated_socket> admitted;
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

uint16_t local_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

/// Whether the gate on `gate_port` has read everything the peer `fd` sent:
/// the peer's kernel has it acknowledged, and the gate's end of the
/// connection holds none of it unread (the kernel's view, /proc/net/tcp).
bool gate_read_all(int fd, uint16_t gate_port) {
  int unacked = -1;
  if (::ioctl(fd, SIOCOUTQ, &unacked) != 0 || unacked != 0)
    return false;
  std::ifstream table{"/proc/net/tcp"};
  std::string line;
  std::getline(table, line); // the header
  while (std::getline(table, line)) {
    unsigned local = 0, remote = 0;
    unsigned long unread = 0;
    if (std::sscanf(line.c_str(), " %*u: %*x:%x %*x:%x %*x %*x:%lx", &local,
                    &remote, &unread) == 3 &&
        local == gate_port && remote == local_port(fd))
      return unread == 0;
  }
  return false;
}

/// Waits until the gate on `gate_port` has read all that `fd` sent; false
/// after 30 s (it closed the connection, say).
bool read_by_gate(int fd, uint16_t gate_port) {
  return lumen::util::spin_until([&] { return gate_read_all(fd, gate_port); },
                                 steady_clock::now() + seconds(30),
                                 lumen::util::poll_pause::yield);
}

credentials tls(const std::string& token, lumen::tls_options opts = {}) {
  opts.enabled = true;
  return lumen::detail::make_credentials(token,
                                         lumen::detail::resolve_tls(opts));
}

/// A plain OpenSSL TLS 1.3 server on loopback with a certificate, for one
/// client: an impostor, or the other end of a check that Lumen's records
/// are standard TLS. Like a Lumen gate, it sends no session tickets.
struct test_server {
  test_server(const lumen::tls_options& cert, const char* suites)
    : ctx(SSL_CTX_new(TLS_server_method())) {
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    BOOST_REQUIRE(
      SSL_CTX_use_certificate_chain_file(ctx, cert.cert_file.c_str()) == 1);
    BOOST_REQUIRE(SSL_CTX_use_PrivateKey_file(ctx, cert.key_file.c_str(),
                                              SSL_FILETYPE_PEM) == 1);
    SSL_CTX_set_num_tickets(ctx, 0);
    if (suites != nullptr)
      BOOST_REQUIRE(SSL_CTX_set_ciphersuites(ctx, suites) == 1);
    listener = lumen::test::listen_any(port);
  }

  ~test_server() {
    SSL_free(ssl);
    if (fd >= 0)
      ::close(fd);
    ::close(listener);
    SSL_CTX_free(ctx);
  }

  /// Takes the client and does the handshake.
  bool accept() {
    fd = ::accept(listener, nullptr, nullptr);
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    return SSL_accept(ssl) == 1;
  }

  std::string read_some() {
    char buf[512];
    int n = SSL_read(ssl, buf, sizeof(buf));
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string{};
  }

  bool read_exact(std::string& out, size_t n) {
    out.assign(n, '\0');
    for (size_t at = 0; at < n;) {
      int k = SSL_read(ssl, &out[at], static_cast<int>(n - at));
      if (k <= 0)
        return false;
      at += static_cast<size_t>(k);
    }
    return true;
  }

  bool write(const std::string& what) {
    return SSL_write(ssl, what.data(), static_cast<int>(what.size())) ==
           static_cast<int>(what.size());
  }

  SSL_CTX* ctx;
  SSL* ssl = nullptr;
  uint16_t port = 0;
  int listener = -1;
  int fd = -1;
};

/// `n` bytes that differ from one offset to the next.
std::string pattern(size_t n, int seed) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i)
    out[i] = static_cast<char>((i * 7 + static_cast<size_t>(seed)) % 251);
  return out;
}

/// Sends `msg` one way through an admitted pair and checks it arrives whole.
void check_carries(gated_socket& from, gated_socket& to,
                   const std::string& msg) {
  bool sent = false;
  // Sent beside the read: a large message fills the sockets' buffers.
  std::thread sender{
    [&] { sent = lumen::detail::write_all(from, msg.data(), msg.size()); }};
  std::string got(msg.size(), '\0');
  BOOST_TEST(lumen::detail::read_all(to, got.data(), got.size()));
  sender.join();
  BOOST_TEST(sent);
  BOOST_TEST(got == msg);
}

lumen::errc code_of_failure(const std::function<void()>& fn,
                            std::string& what) {
  try {
    fn();
  } catch (const lumen::error& e) {
    what = e.what();
    return e.code();
  }
  what = "no error";
  return lumen::errc::unspecified;
}

} // namespace

BOOST_AUTO_TEST_SUITE(gate_suite)

BOOST_AUTO_TEST_CASE(a_peer_with_the_token_is_admitted_and_keeps_its_bytes) {
  gate_fixture f;
  auto client =
    pass_gate(f.where(), plain("s3cret"), "the test gate", seconds(2));
  auto served = f.next_admitted();
  BOOST_REQUIRE(served.fd >= 0);
  // What the peer sends next reaches the protocol behind the gate whole.
  std::string msg = "first bytes after the gate";
  BOOST_REQUIRE(::send(client.fd, msg.data(), msg.size(), 0) ==
                static_cast<ssize_t>(msg.size()));
  std::string got(msg.size(), '\0');
  BOOST_TEST(::recv(served.fd, got.data(), got.size(), MSG_WAITALL) ==
             static_cast<ssize_t>(msg.size()));
  BOOST_TEST(got == msg);
  client.reset();
}

BOOST_AUTO_TEST_CASE(a_wrong_token_is_refused_with_a_code_and_the_reason) {
  gate_fixture f;
  try {
    pass_gate(f.where(), plain("guess"), "the test gate", seconds(2));
    BOOST_FAIL("a wrong token passed the gate");
  } catch (const lumen::error& e) {
    BOOST_TEST(static_cast<int>(e.code()) ==
               static_cast<int>(lumen::errc::wrong_token));
    BOOST_TEST(std::string{e.what()}.find("wrong cluster token") !=
               std::string::npos);
  }
  BOOST_TEST(f.next_admitted().fd == -1);
}

BOOST_AUTO_TEST_CASE(junk_is_dropped_without_an_answer) {
  gate_fixture f;
  int fd = raw_connect(f.g.port());
  std::string junk(4096, 'x');
  ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
  BOOST_TEST(seconds_until_closed(fd) >= 0);
  ::close(fd);
  BOOST_TEST(f.next_admitted().fd == -1);
}

BOOST_AUTO_TEST_CASE(a_peer_that_dawdles_is_dropped_at_the_deadline) {
  gate_fixture f{{milliseconds(300), 64}};
  int fd = raw_connect(f.g.port());
  // The right greeting, a byte at a time, too slowly to finish in time:
  // the pace is the scenario (8 bytes, 100 ms apart, against 300 ms).
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
  auto client =
    pass_gate(f.where(), plain("s3cret"), "the test gate", seconds(2));
  BOOST_TEST(f.next_admitted().fd >= 0);
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
  client.reset();
}

BOOST_AUTO_TEST_CASE(a_peer_sending_a_byte_at_a_time_outlasts_a_stalled_crowd) {
  gate_fixture f{{seconds(30), 4}};
  // The peer comes first, so that a gate dropping the oldest would drop it
  // once three strangers wait beside it. Between each of its bytes a new
  // stranger sends the first byte of a greeting and stops: each fills the
  // gate, and the one heard from longest ago must be a stranger.
  std::string hello(lumen::detail::gate_magic.begin(),
                    lumen::detail::gate_magic.end());
  hello.resize(lumen::detail::greeting_size);
  lumen::detail::put_u16(hello.data() + lumen::detail::gate_magic.size(), 6);
  hello += "s3cret";
  int peer = raw_connect(f.g.port());
  std::vector<int> crowd;
  for (size_t i = 0; i < hello.size(); ++i) {
    BOOST_REQUIRE(::send(peer, &hello[i], 1, MSG_NOSIGNAL) == 1);
    if (i + 1 == hello.size())
      break; // the token is whole: the verdict comes
    BOOST_REQUIRE_MESSAGE(read_by_gate(peer, f.g.port()), "byte " << i);
    int stranger = raw_connect(f.g.port());
    BOOST_REQUIRE(::send(stranger, "L", 1, MSG_NOSIGNAL) == 1);
    BOOST_REQUIRE_MESSAGE(read_by_gate(stranger, f.g.port()), "stranger " << i);
    crowd.push_back(stranger);
  }
  char verdict[3] = {1, 0, 0};
  BOOST_TEST(::recv(peer, verdict, sizeof(verdict), MSG_WAITALL) == 3);
  BOOST_TEST(static_cast<int>(verdict[0]) ==
             static_cast<int>(lumen::detail::verdict_admitted));
  BOOST_TEST(f.next_admitted().fd >= 0);
  // Beside the peer, room for three: all strangers but the last three went.
  for (size_t i = 0; i + 3 < crowd.size(); ++i)
    BOOST_TEST(seconds_until_closed(crowd[i]) >= 0, "stranger " << i);
  for (size_t i = crowd.size() - 3; i < crowd.size(); ++i) {
    pollfd p{crowd[i], POLLIN, 0};
    BOOST_TEST(::poll(&p, 1, 0) == 0, "stranger " << i << " still waits");
  }
  for (int fd : crowd)
    ::close(fd);
  ::close(peer);
}

BOOST_AUTO_TEST_CASE(nothing_listening_is_unreachable_with_the_address) {
  int port;
  {
    gate_fixture f;
    port = f.g.port();
  }
  try {
    pass_gate({"127.0.0.1", static_cast<uint16_t>(port)}, plain("s3cret"),
              "the head", seconds(2));
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
    gate second{"127.0.0.1", f.g.port(), plain("s3cret"), "test"};
    BOOST_FAIL("two gates on one port");
  } catch (const lumen::usage_error& e) {
    BOOST_TEST(std::string{e.what()}.find("pick another --port") !=
                 std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tls_suite)

BOOST_AUTO_TEST_CASE(a_token_keyed_link_hides_the_token_and_the_bytes) {
  gate_fixture f{{}, tls("s3cret-token-on-the-wire")};
  wiretap tap{f.g.port()};
  auto mine = tls("s3cret-token-on-the-wire");
  auto client = pass_gate(address{"127.0.0.1", tap.port()}, mine,
                          "the test gate", seconds(2));
  auto served = f.next_admitted();
  BOOST_REQUIRE(served.fd >= 0);
  std::string up = "plaintext going up, 0123456789";
  std::string down = "plaintext coming down, 9876543210";
  check_carries(client, served, up);
  check_carries(served, client, down);
  // Big enough for many TLS records and reads.
  check_carries(client, served, std::string(3 << 20, 'z'));
  auto seen = tap.seen();
  BOOST_TEST(seen.size() > up.size() + down.size());
  BOOST_TEST(static_cast<unsigned char>(seen[0]) == 0x16); // a TLS record
  BOOST_TEST(seen.find("s3cret-token-on-the-wire") == std::string::npos);
  BOOST_TEST(seen.find("LMNGATE1") == std::string::npos);
  BOOST_TEST(seen.find(up) == std::string::npos);
  BOOST_TEST(seen.find(down) == std::string::npos);
  BOOST_TEST(seen.find(std::string(64, 'z')) == std::string::npos);
  client.reset();
  served.reset();
}

BOOST_AUTO_TEST_CASE(without_tls_the_same_tap_sees_everything) {
  // The check above could pass with a tap that sees nothing: here it must.
  gate_fixture f;
  wiretap tap{f.g.port()};
  auto client = pass_gate(address{"127.0.0.1", tap.port()}, plain("s3cret"),
                          "the gate", seconds(2));
  auto served = f.next_admitted();
  BOOST_REQUIRE(served.fd >= 0);
  check_carries(client, served, "plaintext going up");
  BOOST_TEST(tap.seen().find("s3cret") != std::string::npos);
  BOOST_TEST(tap.seen().find("plaintext going up") != std::string::npos);
  client.reset();
  served.reset();
}

BOOST_AUTO_TEST_CASE(another_token_cannot_finish_the_tls_handshake) {
  gate_fixture f{{}, tls("s3cret")};
  std::string what;
  auto code = code_of_failure(
    [&] { pass_gate(f.where(), tls("guess"), "the test gate", seconds(2)); },
    what);
  BOOST_TEST(
    static_cast<int>(code) == static_cast<int>(lumen::errc::wrong_token), what);
  BOOST_TEST(what.find("another token") != std::string::npos, what);
  BOOST_TEST(f.next_admitted().fd == -1);
}

BOOST_AUTO_TEST_CASE(a_plain_peer_at_a_tls_gate_hears_to_use_tls) {
  gate_fixture f{{}, tls("s3cret")};
  std::string what;
  auto code = code_of_failure(
    [&] { pass_gate(f.where(), plain("s3cret"), "the head", seconds(2)); },
    what);
  BOOST_TEST(static_cast<int>(code) ==
               static_cast<int>(lumen::errc::tls_mismatch),
             what);
  BOOST_TEST(what.find("pass --tls") != std::string::npos, what);
  BOOST_TEST(f.next_admitted().fd == -1);
}

BOOST_AUTO_TEST_CASE(strangers_make_room_before_a_peer_that_proved_the_key) {
  auto creds = tls("s3cret");
  gate_fixture f{{seconds(30), 4}, creds};
  // A peer whose TLS session is up (keyed by the token) but that has not
  // shown the token yet, and a stranger who began a TLS record.
  gated_socket proven{raw_connect(f.g.port())};
  proven.tls =
    creds.tls->connect(proven.fd, steady_clock::now() + seconds(2)).records;
  BOOST_REQUIRE(proven.tls);
  int talking = raw_connect(f.g.port());
  const char start[] = {0x16, 0x03, 0x01, 0x02, 0x00};
  BOOST_REQUIRE(::send(talking, start, sizeof(start), MSG_NOSIGNAL) ==
                static_cast<ssize_t>(sizeof(start)));
  // Read by the gate, the stranger was heard from before any of the
  // silent ones below connected; the proven peer's session is up.
  BOOST_REQUIRE_MESSAGE(
    lumen::util::spin_until([&] { return gate_read_all(talking, f.g.port()); },
                            steady_clock::now() + seconds(30),
                            lumen::util::poll_pause::yield),
    "the gate did not read the stranger's bytes");
  // Silent strangers past the bound: each drops the one heard from longest
  // ago, first the stranger who began a record and stopped, then the
  // oldest silent ones; never the proven peer.
  std::vector<int> silent;
  for (int i = 0; i < 6; ++i)
    silent.push_back(raw_connect(f.g.port()));
  BOOST_TEST(seconds_until_closed(talking) >= 0);
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(seconds_until_closed(silent[size_t(i)]) >= 0, "silent " << i);
  pollfd p{silent[3], POLLIN, 0};
  BOOST_TEST(::poll(&p, 1, 200) == 0); // the newest silent ones still wait
  // The proven peer was never dropped: it shows the token and gets in.
  std::string hello(lumen::detail::gate_magic.begin(),
                    lumen::detail::gate_magic.end());
  hello.resize(lumen::detail::greeting_size);
  lumen::detail::put_u16(hello.data() + lumen::detail::gate_magic.size(), 6);
  hello += "s3cret";
  BOOST_REQUIRE(lumen::detail::write_all(proven, hello.data(), hello.size()));
  char verdict[3] = {1, 0, 0};
  BOOST_TEST(lumen::detail::read_all(proven, verdict, sizeof(verdict)));
  BOOST_TEST(static_cast<int>(verdict[0]) ==
             static_cast<int>(lumen::detail::verdict_admitted));
  BOOST_TEST(f.next_admitted().fd >= 0);
  for (int fd : silent)
    ::close(fd);
  ::close(talking);
}

BOOST_AUTO_TEST_CASE(a_tls_hello_in_pieces_outlasts_a_stalled_crowd) {
  auto creds = tls("s3cret");
  gate_fixture f{{seconds(30), 4}, creds};
  // The peer's TLS client runs in a thread, through a relay this test
  // drives: its hello goes on to the gate 16 bytes at a time, and between
  // two pieces a stranger begins a TLS record and stops. The gate sees the
  // pieces only inside the TLS session, and each must count as progress:
  // a gate dropping the oldest would drop the peer at the fourth stranger.
  uint16_t relay_port = 0;
  int listener = lumen::test::listen_any(relay_port);
  lumen::detail::tls_outcome secured;
  gated_socket peer{lumen::test::connect_loopback(relay_port)};
  int down = -1;
  int up = -1;
  std::thread client{[&] {
    secured = creds.tls->connect(peer.fd, steady_clock::now() + seconds(20));
  }};
  std::thread to_gate;
  std::thread to_peer;
  // Whether the checks below pass or not, the threads end with the test.
  struct at_end {
    std::function<void()> fn;
    ~at_end() {
      fn();
    }
  } let_go{[&] {
    for (int fd : {up, down})
      if (fd >= 0)
        ::shutdown(fd, SHUT_RDWR);
    for (auto* t : {&client, &to_gate, &to_peer})
      if (t->joinable())
        t->join();
    for (int* fd : {&up, &down})
      if (*fd >= 0)
        ::close(std::exchange(*fd, -1));
  }};
  down = ::accept(listener, nullptr, nullptr);
  up = raw_connect(f.g.port());
  std::string hello(5, '\0'); // a record: its header, then its body
  BOOST_REQUIRE(::recv(down, hello.data(), 5, MSG_WAITALL) == 5);
  hello.resize(5 + (static_cast<unsigned char>(hello[3]) << 8 |
                    static_cast<unsigned char>(hello[4])));
  auto body = static_cast<ssize_t>(hello.size() - 5);
  BOOST_REQUIRE(::recv(down, &hello[5], hello.size() - 5, MSG_WAITALL) == body);
  std::vector<int> crowd;
  for (size_t at = 0; at < hello.size(); at += 16) {
    auto n = std::min<size_t>(16, hello.size() - at);
    BOOST_REQUIRE(::send(up, &hello[at], n, MSG_NOSIGNAL) ==
                  static_cast<ssize_t>(n));
    BOOST_REQUIRE_MESSAGE(read_by_gate(up, f.g.port()), "piece at " << at);
    if (at + n == hello.size())
      break;
    int stranger = raw_connect(f.g.port());
    const char start[] = {0x16, 0x03, 0x01};
    BOOST_REQUIRE(::send(stranger, start, sizeof(start), MSG_NOSIGNAL) ==
                  static_cast<ssize_t>(sizeof(start)));
    BOOST_REQUIRE_MESSAGE(read_by_gate(stranger, f.g.port()),
                          "stranger " << crowd.size());
    crowd.push_back(stranger);
  }
  // The rest of the handshake and what follows it goes through as it comes.
  auto pump = [](int from, int to) {
    char buf[4096];
    for (;;) {
      auto n = ::recv(from, buf, sizeof(buf), 0);
      if (n <= 0 || ::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n)
        break;
    }
    ::shutdown(to, SHUT_WR);
  };
  to_gate = std::thread{pump, down, up};
  to_peer = std::thread{pump, up, down};
  client.join();
  BOOST_TEST_REQUIRE(static_cast<bool>(secured.records), secured.why);
  peer.tls = std::move(secured.records);
  std::string greeting(lumen::detail::gate_magic.begin(),
                       lumen::detail::gate_magic.end());
  greeting.resize(lumen::detail::greeting_size);
  lumen::detail::put_u16(greeting.data() + lumen::detail::gate_magic.size(), 6);
  greeting += "s3cret";
  BOOST_REQUIRE(
    lumen::detail::write_all(peer, greeting.data(), greeting.size()));
  char verdict[3] = {1, 0, 0};
  BOOST_TEST(lumen::detail::read_all(peer, verdict, sizeof(verdict)));
  BOOST_TEST(static_cast<int>(verdict[0]) ==
             static_cast<int>(lumen::detail::verdict_admitted));
  BOOST_TEST(f.next_admitted().fd >= 0);
  BOOST_TEST(crowd.size() > 3u);
  for (size_t i = 0; i + 3 < crowd.size(); ++i)
    BOOST_TEST(seconds_until_closed(crowd[i]) >= 0, "stranger " << i);
  let_go.fn();
  for (int fd : crowd)
    ::close(fd);
  ::close(listener);
}

BOOST_AUTO_TEST_CASE(a_link_dropped_during_the_tls_handshake_is_tried_again) {
  auto creds = tls("s3cret");
  gate_fixture f{{}, creds};
  {
    wiretap busy{f.g.port(), 2}; // two tries dropped, the third relayed
    auto link =
      pass_gate({"127.0.0.1", busy.port()}, creds, "the head", seconds(5));
    BOOST_TEST(link.fd >= 0);
    BOOST_TEST(f.next_admitted().fd >= 0);
  }
  wiretap gone{f.g.port(), 4}; // every try dropped
  std::string what;
  auto code = code_of_failure(
    [&] {
      pass_gate({"127.0.0.1", gone.port()}, creds, "the head", seconds(5));
    },
    what);
  BOOST_TEST(
    static_cast<int>(code) == static_cast<int>(lumen::errc::unreachable), what);
  BOOST_TEST(what.find("4 tries") != std::string::npos, what);
  BOOST_TEST(what.find("too busy") != std::string::npos, what);
}

BOOST_AUTO_TEST_CASE(lumens_records_are_standard_tls_both_ways) {
  // OpenSSL itself at the other end, in each suite Lumen seals: what Lumen
  // sends opens there, and what OpenSSL sends opens here, across records.
  auto cert = self_signed("interop");
  for (const char* suite : {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                            "TLS_CHACHA20_POLY1305_SHA256"}) {
    BOOST_TEST_CONTEXT(suite) {
      test_server server{cert, suite};
      auto mine = tls("s3cret", cert);
      auto up = pattern(100003, 1);
      auto down = pattern(70001, 2);
      std::string got_up;
      bool served = false;
      std::thread t{[&] {
        served = server.accept() && server.read_exact(got_up, up.size()) &&
                 server.write(down);
      }};
      gated_socket link{lumen::test::connect_loopback(server.port)};
      auto out = mine.tls->connect(link.fd, steady_clock::now() + seconds(5));
      if (!out.records)
        ::shutdown(link.fd, SHUT_RDWR); // lets the server's thread end
      link.tls = std::move(out.records);
      std::string got_down(down.size(), '\0');
      bool sent =
        link.tls && lumen::detail::write_all(link, up.data(), up.size());
      bool read =
        sent && lumen::detail::read_all(link, got_down.data(), got_down.size());
      t.join();
      BOOST_TEST_REQUIRE(static_cast<bool>(link.tls), out.why);
      BOOST_TEST(sent);
      BOOST_TEST(read);
      BOOST_TEST(served);
      BOOST_TEST((got_up == up));
      BOOST_TEST((got_down == down));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_record_changed_replayed_or_reordered_ends_the_link) {
  lumen::detail::tls_traffic_key key;
  key.cipher = EVP_aes_128_gcm();
  key.key.fill(7);
  key.iv.fill(9);
  lumen::detail::tls_records sender{key, key};
  std::vector<char> first, second;
  sender.seal("first", 5, first);
  sender.seal("second", 6, second);
  // A fresh reader given `records` in turn: what it opens, and why it stops.
  auto open = [&](std::vector<std::vector<char>> records, std::string& why) {
    lumen::detail::tls_records reader{key, key};
    std::string opened;
    for (auto& r : records) {
      auto room = reader.raw_space();
      std::memcpy(room.iov_base, r.data(), r.size());
      reader.raw_came(r.size());
      char buf[64];
      opened.append(buf, reader.take(buf, sizeof(buf)));
    }
    why = reader.why();
    return opened;
  };
  std::string why;
  BOOST_TEST(open({first, second}, why) == "firstsecond");
  BOOST_TEST(why.empty(), why);
  auto changed = second;
  changed[9] ^= 1; // one bit of the sealed data
  BOOST_TEST(open({first, changed}, why) == "first");
  BOOST_TEST(why.find("does not open") != std::string::npos, why);
  BOOST_TEST(open({first, first}, why) == "first"); // replayed
  BOOST_TEST(why.find("does not open") != std::string::npos, why);
  BOOST_TEST(open({second, first}, why).empty()); // out of order
  BOOST_TEST(why.find("does not open") != std::string::npos, why);
  auto junk = first;
  junk[0] = 0x42; // not a TLS record
  BOOST_TEST(open({junk}, why).empty());
  BOOST_TEST(why.find("malformed") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(a_tls_peer_at_a_plain_gate_hears_it_may_not_use_tls) {
  gate_fixture f;
  std::string what;
  auto code = code_of_failure(
    [&] { pass_gate(f.where(), tls("s3cret"), "the head", seconds(2)); }, what);
  BOOST_TEST(
    static_cast<int>(code) == static_cast<int>(lumen::errc::unreachable), what);
  BOOST_TEST(what.find("without --tls") != std::string::npos, what);
  BOOST_TEST(f.next_admitted().fd == -1);
}

BOOST_AUTO_TEST_CASE(a_token_keyed_client_tells_an_impostor_nothing) {
  // A server that does not know the token but has a certificate, and takes
  // any client: the client must not finish the handshake, or it would send
  // the token to it.
  auto cert = self_signed("impostor");
  test_server impostor{cert, nullptr};
  std::string heard;
  std::thread serve{[&] {
    if (impostor.accept())
      heard = impostor.read_some();
  }};
  std::string what;
  auto code = code_of_failure(
    [&] {
      pass_gate({"127.0.0.1", impostor.port}, tls("s3cret"), "the head",
                seconds(2));
    },
    what);
  serve.join();
  BOOST_TEST(
    static_cast<int>(code) != static_cast<int>(lumen::errc::unspecified), what);
  BOOST_TEST(heard.find("s3cret") == std::string::npos);
  BOOST_TEST(heard.empty(), heard);
}

BOOST_AUTO_TEST_CASE(
  a_server_trickling_bytes_cannot_hold_a_client_past_its_deadline) {
  // A "server" that begins a 16 KiB handshake record and then sends a byte
  // every 100 ms: each read of the client's gets something, but the
  // handshake must still end at its deadline.
  uint16_t port = 0;
  int listener = lumen::test::listen_any(port);
  std::thread trickler{[listener] {
    int fd = ::accept(listener, nullptr, nullptr);
    const char header[] = {0x16, 0x03, 0x03, 0x40, 0x00};
    bool ok = ::send(fd, header, sizeof(header), MSG_NOSIGNAL) == 5;
    for (int i = 0; ok && i < 100; ++i) { // 10 s at most
      std::this_thread::sleep_for(milliseconds(100));
      ok = ::send(fd, "x", 1, MSG_NOSIGNAL) == 1;
    }
    ::close(fd);
  }};
  auto start = steady_clock::now();
  std::string what;
  auto code = code_of_failure(
    [&] {
      pass_gate({"127.0.0.1", port}, tls("s3cret"), "the head", seconds(1));
    },
    what);
  auto took = duration<double>(steady_clock::now() - start).count();
  trickler.join();
  ::close(listener);
  BOOST_TEST(
    static_cast<int>(code) == static_cast<int>(lumen::errc::unreachable), what);
  BOOST_TEST(what.find("in time") != std::string::npos, what);
  BOOST_TEST(took < 3.0);
}

BOOST_AUTO_TEST_CASE(a_stalled_tls_handshake_is_dropped_at_the_deadline) {
  gate_fixture f{{milliseconds(300), 64}, tls("s3cret")};
  int fd = raw_connect(f.g.port());
  // The first bytes of a TLS record, then nothing.
  const char start[] = {0x16, 0x03, 0x01, 0x02, 0x00};
  ::send(fd, start, sizeof(start), MSG_NOSIGNAL);
  auto closed_after = seconds_until_closed(fd);
  BOOST_TEST(closed_after >= 0);
  BOOST_TEST(closed_after < 5.0);
  ::close(fd);
  BOOST_TEST(f.next_admitted().fd == -1);
}

BOOST_AUTO_TEST_CASE(certificates_of_the_cluster_ca_get_in_others_do_not) {
  auto cluster = self_signed("cluster");
  gate_fixture f{{}, tls("s3cret", cluster)};
  wiretap tap{f.g.port()};
  auto mine = tls("s3cret", cluster);
  auto client =
    pass_gate(address{"127.0.0.1", tap.port()}, mine, "the gate", seconds(2));
  auto served = f.next_admitted();
  BOOST_REQUIRE(served.fd >= 0);
  check_carries(client, served, "with certificates");
  BOOST_TEST(tap.seen().find("with certificates") == std::string::npos);
  BOOST_TEST(tap.seen().find("s3cret") == std::string::npos);
  client.reset();
  served.reset();
  // A certificate the cluster's CA did not sign: refused, whatever the token.
  auto stranger = self_signed("stranger");
  std::string what;
  auto code = code_of_failure(
    [&] {
      pass_gate(f.where(), tls("s3cret", stranger), "the gate", seconds(2));
    },
    what);
  BOOST_TEST(static_cast<int>(code) ==
               static_cast<int>(lumen::errc::tls_mismatch),
             what);
  BOOST_TEST(what.find("--tls-ca") != std::string::npos, what);
  BOOST_TEST(f.next_admitted().fd == -1);
  // The same stranger trusting the cluster's CA: its handshake ends, then
  // the gate's alert says why it is refused, and so does the error.
  auto trusting = stranger;
  trusting.ca_file = cluster.cert_file;
  code = code_of_failure(
    [&] {
      pass_gate(f.where(), tls("s3cret", trusting), "the gate", seconds(2));
    },
    what);
  BOOST_TEST(static_cast<int>(code) ==
               static_cast<int>(lumen::errc::tls_mismatch),
             what);
  BOOST_TEST(what.find("did not accept this process's certificate") !=
               std::string::npos,
             what);
  BOOST_TEST(f.next_admitted().fd == -1);
}

BOOST_AUTO_TEST_CASE(unusable_tls_files_are_usage_errors_naming_them) {
  auto cluster = self_signed("cluster");
  auto swapped = cluster;
  std::swap(swapped.cert_file, swapped.key_file);
  BOOST_CHECK_EXCEPTION(tls("s3cret", swapped), lumen::usage_error,
                        [&](const lumen::usage_error& e) {
                          return std::string{e.what()}.find(
                                   swapped.cert_file) != std::string::npos &&
                                 e.code() == lumen::errc::tls_mismatch;
                        });
  auto half = cluster;
  half.key_file.clear();
  BOOST_CHECK_THROW(tls("s3cret", half), lumen::usage_error);
}

BOOST_AUTO_TEST_SUITE_END()

// The policy alone, without sockets: which handshake a full gate drops.
BOOST_AUTO_TEST_SUITE(handshake_queue_suite)

using queue = lumen::detail::handshake_queue<int>;
using stage = queue::stage;

BOOST_AUTO_TEST_CASE(the_one_heard_from_longest_ago_makes_room) {
  queue q;
  auto a = q.add(1);
  auto b = q.add(2);
  q.add(3);
  BOOST_TEST(*q.victim()->it == 1);
  q.heard(a); // a few bytes from the first: it goes to the back
  BOOST_TEST(*q.victim()->it == 2);
  q.remove(b);
  BOOST_TEST(*q.victim()->it == 3);
  BOOST_TEST(q.size() == 2u);
}

BOOST_AUTO_TEST_CASE(a_steady_peer_outlasts_any_crowd_that_went_quiet) {
  // A bound of 128, filled by strangers that each send once and stop, 100
  // arriving between two of the peer's bytes, for 10,000 of them.
  const size_t bound = 128;
  queue q;
  auto peer = q.add(0);
  int next = 1;
  for (int byte = 0; byte < 10000; ++byte) {
    for (int i = 0; i < 100; ++i) {
      if (q.size() >= bound) {
        auto v = q.victim();
        BOOST_REQUIRE(*v->it != 0);
        q.remove(*v);
      }
      q.heard(q.add(next++)); // connects, sends a byte, says no more
    }
    q.heard(peer);
  }
  BOOST_TEST(q.size() == bound);
}

BOOST_AUTO_TEST_CASE(an_answered_peer_goes_last_and_a_proven_one_never) {
  queue q;
  auto answered = q.add(1);
  auto proven = q.add(2);
  auto waiting = q.add(3);
  q.advance(answered, stage::answered);
  q.advance(proven, stage::proven);
  q.advance(proven, stage::answered); // never down
  BOOST_TEST(*q.victim()->it == 3);
  q.remove(waiting);
  BOOST_TEST(*q.victim()->it == 1);
  q.remove(answered);
  BOOST_TEST(!q.victim().has_value());
  BOOST_TEST(*q.any()->it == 2);
  q.remove(proven);
  BOOST_TEST(!q.any().has_value());
  BOOST_TEST(q.size() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
