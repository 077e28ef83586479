#define BOOST_TEST_MODULE security
#include <boost/test/unit_test.hpp>

// Strangers on both ports of a head and a node: wrong tokens, junk, giant
// length headers, slow and silent peers. None of them reaches CAF or the
// data plane, none makes a process allocate much or start threads, none
// gets a live node given up for dead. Peers with the token that send
// malformed frames: hostile_frames.cpp, in the same suite.

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <random>
#include <thread>

#include "cluster_fixture.hpp"
#include "cluster_job.hpp"
#include "peer_wire.hpp"

using namespace lumen::test;

BOOST_TEST_GLOBAL_FIXTURE(cluster_fixture);

namespace {

/// True once the peer closed `fd` (reads end, or a reset because it left
/// our bytes unread), within the read timeout.
bool closed_by_peer(int fd) {
  char buf[256];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET))
      return true;
    if (n < 0)
      return false;
  }
}

/// Sends junk to `address` and connects-and-leaves, 10 times each.
void throw_junk_at(const std::string& address) {
  std::mt19937 rng{42};
  for (int round = 0; round < 20; ++round) {
    int fd = connect_to(address);
    BOOST_REQUIRE(fd >= 0);
    if (round % 2 == 0) { // junk; odd rounds just connect and leave
      std::vector<char> junk(1 << 16);
      for (auto& b : junk)
        b = static_cast<char>(rng());
      auto sent = ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
      static_cast<void>(sent);
    }
    ::close(fd);
  }
}

/// A number from /proc/PID/status, e.g. "VmRSS" (kB) or "Threads".
long proc_status(pid_t pid, const std::string& key) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0)
      return std::stol(line.substr(key.size() + 1));
  return -1;
}

/// A BASP header (CAF 0.17) as a peer sends it first: a handshake of
/// protocol version 1 announcing a payload of 4 GiB - 1.
std::vector<unsigned char> giant_basp_header() {
  std::vector<unsigned char> h(32, 0);
  h[0] = 0x00;                                   // server handshake
  std::fill(h.begin() + 4, h.begin() + 8, 0xff); // payload length
  h[15] = 1;                                     // version
  return h;
}

} // namespace

BOOST_AUTO_TEST_SUITE(security)

BOOST_AUTO_TEST_CASE(a_wrong_token_is_refused_on_both_sides) {
  auto& cl = *the_cluster;
  auto wrong = cl.home + "/wrong-token";
  std::ofstream{wrong} << "not-the-token\n";
  ::chmod(wrong.c_str(), 0600);
  auto [code, out] = run(
    {LUMEN_CLI, "status", "--address", cl.head.address, "--token-file", wrong},
    cl.env());
  BOOST_TEST(code == 1);
  BOOST_TEST(out.find("wrong cluster token") != std::string::npos, out);
  auto node = run({LUMEN_CLI, "start", "--block", "--address", cl.head.address,
                   "--token-file", wrong},
                  cl.env());
  BOOST_TEST(node.first == 1);
  BOOST_TEST(node.second.find("wrong cluster token") != std::string::npos,
             node.second);
  // The head's log names each refused peer by its address.
  std::string refused = "refused a control connection from 127.0.0.1:";
  BOOST_TEST(cl.head.proc->await_output(refused, seconds(5)).has_value());
  auto log = cl.head.proc->output();
  auto first = log.find(refused);
  BOOST_TEST(log.find(refused, first + 1) != std::string::npos, log);
}

BOOST_AUTO_TEST_CASE(a_caf_peer_without_the_token_cannot_even_connect) {
  auto& cl = *the_cluster;
  for (auto* address : {&cl.head.address, &cl.nodes[0].address}) {
    auto colon = address->rfind(':');
    auto [code, out] =
      run({STRANGER, address->substr(0, colon), address->substr(colon + 1)});
    BOOST_TEST(code == 0, out);
    BOOST_TEST(out.find("connect: refused") != std::string::npos, out);
    BOOST_TEST(out.find("ALLOWED") == std::string::npos, out);
  }
}

BOOST_AUTO_TEST_CASE(a_giant_length_header_costs_nothing_on_any_port) {
  auto& cl = *the_cluster;
  struct target {
    process* proc;
    std::string address;
  };
  std::vector<target> targets{
    {cl.head.proc.get(), cl.head.address},
    {cl.head.proc.get(), data_address_of("head")},
    {cl.nodes[0].proc.get(), cl.nodes[0].address},
    {cl.nodes[0].proc.get(), data_address_of(cl.nodes[0].id)}};
  auto basp = giant_basp_header();
  frame_header frame{};
  frame.length = uint64_t{1} << 36;
  for (auto& t : targets) {
    auto rss_before = proc_status(t.proc->pid(), "VmRSS");
    for (bool as_basp : {true, false}) {
      int fd = connect_to(t.address);
      BOOST_REQUIRE(fd >= 0);
      if (as_basp)
        ::send(fd, basp.data(), basp.size(), MSG_NOSIGNAL);
      else
        ::send(fd, &frame, sizeof(frame), MSG_NOSIGNAL);
      BOOST_TEST(closed_by_peer(fd), t.address);
      ::close(fd);
    }
    auto grown_kb = proc_status(t.proc->pid(), "VmRSS") - rss_before;
    BOOST_TEST_MESSAGE("giant headers on " << t.address << ": RSS grew by "
                                           << grown_kb << " kB");
    BOOST_TEST(grown_kb < 16 * 1024,
               t.address << " grew by " << grown_kb << " kB");
    auto [code, out] = cl.status();
    BOOST_TEST(code == 0, out);
  }
  // No node is given up for dead: through a whole heartbeat timeout and
  // more, every node stays alive.
  auto start = steady_clock::now();
  while (seconds_since(start) < 2.0) {
    auto dead = ids(lumen::nodes(), false);
    BOOST_TEST_REQUIRE(dead.empty(), *dead.begin() << " was given up");
  }
  BOOST_TEST(lumen::get(lumen::task(where).on_node(cl.nodes[0].id).remote(),
                        deadline) == cl.nodes[0].id);
}

BOOST_AUTO_TEST_CASE(the_data_port_admits_only_the_token) {
  auto& cl = *the_cluster;
  auto data = data_address_of("head");
  BOOST_REQUIRE(!data.empty());
  // A wrong token through the gate: refused, with the reason.
  int wrong = connect_to(data);
  std::string token = "not-the-token";
  std::string hello = "LMNGATE1";
  hello += static_cast<char>(token.size());
  hello += '\0';
  hello += token;
  ::send(wrong, hello.data(), hello.size(), MSG_NOSIGNAL);
  unsigned char verdict[3] = {};
  BOOST_REQUIRE(::recv(wrong, verdict, sizeof(verdict), MSG_WAITALL) == 3);
  BOOST_TEST(verdict[0] == 1); // refused
  std::string why(verdict[1], '\0');
  ::recv(wrong, why.data(), why.size(), MSG_WAITALL);
  BOOST_TEST(why == "wrong cluster token");
  ::close(wrong);
  BOOST_TEST(
    cl.head.proc
      ->await_output("refused a data connection from 127.0.0.1:", seconds(5))
      .has_value());
  // A peer that connects and stays silent is let go after the handshake
  // deadline, and others are served meanwhile.
  int silent = connect_to(data);
  auto connected = steady_clock::now();
  BOOST_TEST(lumen::get(lumen::task(where).on_node("head").remote(),
                        deadline) == "head");
  BOOST_TEST(closed_by_peer(silent));
  BOOST_TEST(seconds_since(connected) < 3.5);
  ::close(silent);
  BOOST_TEST(cl.head.proc->running());
}

BOOST_AUTO_TEST_CASE(slow_drip_peers_are_closed_within_the_deadline) {
  auto& cl = *the_cluster;
  auto pid = cl.head.proc->pid();
  auto threads_before = proc_status(pid, "Threads");
  // 200 peers on each port send the right greeting, a byte every 500 ms:
  // each would finish after 4 s, past the gate's 2 s deadline.
  std::vector<pollfd> peers;
  for (auto& address : {cl.head.address, data_address_of("head")})
    for (int i = 0; i < 200; ++i) {
      int fd = connect_to(address);
      BOOST_REQUIRE(fd >= 0);
      peers.push_back({fd, POLLIN, 0});
    }
  auto start = steady_clock::now();
  std::string greeting = "LMNGATE1";
  size_t open = peers.size();
  long threads_during = 0;
  bool status_answered = false;
  for (size_t step = 0; open > 0 && seconds_since(start) < 10.0; ++step) {
    if (step < greeting.size())
      for (auto& p : peers)
        if (p.fd >= 0)
          ::send(p.fd, &greeting[step], 1, MSG_NOSIGNAL);
    if (step == 1) {
      threads_during = proc_status(pid, "Threads");
      status_answered = cl.status().first == 0;
    }
    // Wait up to 500 ms for closes, then drip the next byte.
    auto slice_end = steady_clock::now() + milliseconds(500);
    while (open > 0 && steady_clock::now() < slice_end) {
      auto left = duration_cast<milliseconds>(slice_end - steady_clock::now());
      if (::poll(peers.data(), peers.size(),
                 static_cast<int>(std::max<long>(1, left.count()))) <= 0)
        continue;
      for (auto& p : peers)
        if (p.fd >= 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
          BOOST_TEST(closed_by_peer(p.fd));
          ::close(p.fd);
          p.fd = -1;
          --open;
        }
    }
  }
  auto all_closed_after = seconds_since(start);
  BOOST_TEST_MESSAGE("slow drip: " << peers.size() - open << " of "
                                   << peers.size() << " peers closed after "
                                   << all_closed_after << " s; head threads "
                                   << threads_before << " before, "
                                   << threads_during << " during");
  BOOST_TEST(open == 0u);
  BOOST_TEST(all_closed_after < 3.5,
             "closed after " << all_closed_after << " s");
  BOOST_TEST(status_answered);
  BOOST_TEST(threads_during <= threads_before + 2,
             threads_before << " threads before, " << threads_during
                            << " during");
  BOOST_TEST(ids(lumen::nodes(), false).empty());
}

BOOST_AUTO_TEST_CASE(junk_bytes_and_port_scans_leave_the_head_working) {
  auto& cl = *the_cluster;
  throw_junk_at(cl.head.address);
  throw_junk_at(data_address_of("head"));
  BOOST_TEST(cl.head.proc->running());
  BOOST_TEST(ids(lumen::nodes(), true).count("head") == 1);
  BOOST_TEST(lumen::get(lumen::task(where).on_node("head").remote(),
                        deadline) == "head");
}

BOOST_AUTO_TEST_CASE(junk_pulses_change_nothing) {
  // The control ports hear liveness pulses over UDP (transport/pulse.hpp):
  // datagrams of every size, and of a pulse's size and first bytes with
  // anything after, for 3 s from a port the nodes never heard of. None may
  // stop a process or pass for a pulse.
  auto& cl = *the_cluster;
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  BOOST_REQUIRE(fd >= 0);
  std::mt19937 rng{7};
  auto started = std::chrono::steady_clock::now();
  size_t sent = 0;
  while (std::chrono::steady_clock::now() - started < std::chrono::seconds(3)) {
    for (auto& address : {cl.head.address, cl.nodes[0].address}) {
      auto to = loopback_port_of(address);
      std::vector<char> junk(sent % 3 == 0 ? rng() % 100 : 35);
      for (auto& b : junk)
        b = static_cast<char>(rng());
      if (sent % 3 == 1)
        std::copy_n("LMNPULS1\x01", 9, junk.begin());
      if (::sendto(fd, junk.data(), junk.size(), 0,
                   reinterpret_cast<sockaddr*>(&to), sizeof to) >= 0)
        ++sent;
    }
    if (sent % 64 == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::close(fd);
  BOOST_TEST(sent > 1000u);
  BOOST_TEST(cl.head.proc->running());
  BOOST_TEST(cl.nodes[0].proc->running());
  BOOST_TEST(ids(lumen::nodes(), false).empty());
  for (auto id : {"head", "node-1"})
    BOOST_TEST(lumen::get(lumen::task(where).on_node(id).remote(), deadline) ==
               id);
}

BOOST_AUTO_TEST_SUITE_END()
