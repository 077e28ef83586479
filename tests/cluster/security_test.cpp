#define BOOST_TEST_MODULE security
#include <boost/test/unit_test.hpp>

// Strangers on both ports of a head and a node: wrong tokens, junk, giant
// length headers, slow and silent peers. None of them reaches CAF or the
// data plane, none makes a process allocate much or start threads, none
// gets a live node given up for dead.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <random>

#include <lumen/caf_interop.hpp>

#include "cluster_fixture.hpp"
#include "cluster_job.hpp"

using namespace lumen::test;

BOOST_TEST_GLOBAL_FIXTURE(cluster_fixture);

namespace {

/// A connection to `address` on loopback; -1 if it cannot be made.
int connect_to(const std::string& address) {
  auto colon = address.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port =
    htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{15, 0}; // a bound on every read below
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

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

std::string data_address_of(const std::string& id) {
  for (auto& n : lumen::nodes())
    if (n.id == id)
      return n.data_address;
  return {};
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

/// The data plane's frame header (runtime/src/data_plane.hpp).
struct frame_header {
  uint32_t magic = 0x314e4d4c;
  uint8_t kind = 1; // task
  uint8_t ok = 1;
  uint16_t reserved = 0;
  uint64_t id = 1;
  uint64_t length;
};

/// A data connection to node `id` that passed the gate with the cluster's
/// token: a peer that is let in, and then sends what it likes.
int admitted_data_connection(const std::string& id) {
  int fd = connect_to(data_address_of(id));
  BOOST_REQUIRE(fd >= 0);
  std::ifstream in{the_cluster->token_file};
  std::string token;
  in >> token;
  std::string hello = "LMNGATE1";
  hello += static_cast<char>(token.size() & 0xff);
  hello += static_cast<char>(token.size() >> 8);
  hello += token;
  ::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
  unsigned char verdict[3] = {};
  BOOST_REQUIRE(::recv(fd, verdict, sizeof(verdict), MSG_WAITALL) == 3);
  BOOST_REQUIRE(verdict[0] == 0); // admitted
  return fd;
}

/// Sends a frame of `kind` and returns the header of its reply, whose
/// payload (an error's text, at most 4 KiB) is read and dropped.
frame_header ask(int fd, uint8_t kind, uint64_t id,
                 const std::vector<char>& payload) {
  frame_header h;
  h.kind = kind;
  h.id = id;
  h.length = payload.size();
  BOOST_REQUIRE(::send(fd, &h, sizeof(h), MSG_NOSIGNAL) == sizeof(h));
  BOOST_REQUIRE(::send(fd, payload.data(), payload.size(), MSG_NOSIGNAL) ==
                static_cast<ssize_t>(payload.size()));
  frame_header reply{};
  BOOST_REQUIRE(::recv(fd, &reply, sizeof(reply), MSG_WAITALL) ==
                sizeof(reply));
  BOOST_REQUIRE(reply.length < 4096);
  // A read of nothing would wait for the next byte, or the socket's
  // timeout: an empty payload is not read.
  std::vector<char> rest(reply.length);
  BOOST_REQUIRE(rest.empty() ||
                ::recv(fd, rest.data(), rest.size(), MSG_WAITALL) ==
                  static_cast<ssize_t>(rest.size()));
  return reply;
}

/// The little-endian bytes of `value`, then `tail`.
std::vector<char> u64_then(uint64_t value, std::vector<char> tail = {}) {
  std::vector<char> out;
  for (size_t i = 0; i < sizeof(value); ++i)
    out.push_back(static_cast<char>(value >> (8 * i)));
  for (char c : tail)
    out.push_back(c);
  return out;
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

BOOST_AUTO_TEST_CASE(hostile_typed_requests_with_the_token_get_error_replies) {
  // A peer with the token is still not trusted with the bytes of its typed
  // requests: each malformed one is answered with an error, and the node
  // goes on serving.
  auto& cl = *the_cluster;
  auto calc = lumen::spawn_on<calculator>("node-1", "calculator");
  int fd = admitted_data_connection("node-1");
  std::mt19937 rng{7};
  std::vector<std::vector<char>> payloads;
  payloads.emplace_back(3, 'x');            // shorter than its ids
  payloads.emplace_back(16 + 4096, '\xff'); // lengths of 2^64 everywhere
  std::vector<char> noise(16 + (1 << 16));
  for (auto& b : noise)
    b = static_cast<char>(rng());
  payloads.push_back(noise);
  uint64_t id = 1;
  for (auto& p : payloads) {
    auto reply = ask(fd, 4 /* typed */, id, p);
    BOOST_TEST(reply.kind == 3); // a reply
    BOOST_TEST(reply.ok == 0);   // failed
    BOOST_TEST(reply.id == id);
    ++id;
  }
  ::close(fd);
  BOOST_TEST(cl.nodes[0].proc->running());
  BOOST_TEST(lumen::get(lumen::call(calc, add_atom::value, 2, 3), deadline) ==
             5);
}

BOOST_AUTO_TEST_CASE(hostile_object_kill_and_cancel_frames_are_refused) {
  // Frames of the right kind with the wrong bytes, and well-formed ones
  // naming objects, holds, actors and requests the node never had: the
  // first are refused, the others change nothing, and the node goes on.
  auto& cl = *the_cluster;
  int fd = admitted_data_connection("node-1");
  constexpr uint8_t object = 6, kill = 7, cancel = 8;
  struct refused {
    uint8_t kind;
    std::vector<char> payload;
  };
  std::vector<refused> bad{
    {object, {}},                            // no op
    {object, {1, 2, 3}},                     // a fetch cut short
    {object, std::vector<char>(18, '\x01')}, // a fetch too long
    {object, {2, 1, 2, 3}},                  // a give-back cut short
    {object, std::vector<char>(17, '\x09')}, // an unknown op
    {object, {1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1}}, // no such
    {kill, {1, 2, 3}},          // an id cut short
    {cancel, {1, 2, 3}},        // an id cut short
    {cancel, u64_then(5)},      // no force byte
    {cancel, u64_then(5, {7})}, // force must be 0 or 1
  };
  uint64_t id = 100;
  for (auto& b : bad) {
    auto reply = ask(fd, b.kind, id, b.payload);
    BOOST_TEST(reply.kind == 3);
    BOOST_TEST(reply.ok == 0, "frame of kind " << int{b.kind} << ", "
                                               << b.payload.size()
                                               << " bytes: accepted");
    BOOST_TEST(reply.id == id);
    ++id;
  }
  std::vector<refused> harmless{
    {object, {2, 1, 0, 0, 0, 0, 0, 0, 0}}, // gives back a hold never given
    {kill, u64_then(424242)},              // no such actor
    {cancel, u64_then(1, {1})},            // forced, of a request never made
  };
  for (auto& h : harmless) {
    auto reply = ask(fd, h.kind, id++, h.payload);
    BOOST_TEST(reply.ok == 1);
  }
  ::close(fd);
  BOOST_TEST(cl.nodes[0].proc->running());
  BOOST_TEST(lumen::get(lumen::task(where).on_node("node-1").remote(),
                        deadline) == "node-1");
}

BOOST_AUTO_TEST_CASE(hostile_shared_memory_frames_are_refused) {
  // Offers of an arena that is not one (cut short, naming a process's
  // stdin or nothing at all, an unknown op) are refused; a frame saying
  // its block is in an arena, or naming a landing there, on a link that
  // agreed on none is junk: the node drops the link and goes on.
  auto& cl = *the_cluster;
  constexpr uint8_t typed = 4, arena = 9;
  auto offer = [](uint32_t pid, uint32_t fd) {
    std::vector<char> out{1}; // op: offer
    for (uint32_t x : {pid, fd})
      for (size_t i = 0; i < sizeof(x); ++i)
        out.push_back(static_cast<char>(x >> (8 * i)));
    out.resize(out.size() + 16, '\x5a'); // a cookie
    return out;
  };
  // This process's own arena (made for its first link), offered with
  // another cookie.
  BOOST_TEST(lumen::get(lumen::task(where).on_node("node-1").remote(),
                        deadline) == "node-1");
  uint32_t arena_fd = 0;
  for (auto& e : std::filesystem::directory_iterator{"/proc/self/fd"}) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path(), ec).string();
    if (target.find("memfd:lumen-arena") != std::string::npos)
      arena_fd = static_cast<uint32_t>(std::stoul(e.path().filename()));
  }
  BOOST_REQUIRE(arena_fd != 0);
  int fd = admitted_data_connection("node-1");
  std::vector<std::vector<char>> refused{
    {},
    {1, 2, 3},
    offer(static_cast<uint32_t>(::getpid()), arena_fd),
    offer(static_cast<uint32_t>(::getpid()), 0),
    offer(static_cast<uint32_t>(cl.nodes[0].proc->pid()), 0),
    offer(4000000000u, 3),
    {7},
  };
  uint64_t id = 300;
  for (auto& p : refused) {
    auto reply = ask(fd, arena, id, p);
    BOOST_TEST(reply.kind == 3);
    BOOST_TEST(reply.ok == 0, p.size() << " bytes of offer: accepted");
    BOOST_TEST(reply.id == id);
    ++id;
  }
  ::close(fd);
  for (uint8_t flag : {uint8_t{0x80}, uint8_t{0x40}}) {
    fd = admitted_data_connection("node-1");
    frame_header h;
    h.kind = typed | flag;
    h.length = 24 + 64;
    std::vector<char> payload(h.length, '\0');
    BOOST_REQUIRE(::send(fd, &h, sizeof(h), MSG_NOSIGNAL) == sizeof(h));
    BOOST_REQUIRE(::send(fd, payload.data(), payload.size(), MSG_NOSIGNAL) ==
                  static_cast<ssize_t>(payload.size()));
    char c;
    BOOST_TEST(::recv(fd, &c, 1, MSG_WAITALL) == 0); // dropped, not answered
    ::close(fd);
  }
  BOOST_TEST(cl.nodes[0].proc->running());
  BOOST_TEST(lumen::get(lumen::task(where).on_node("node-1").remote(),
                        deadline) == "node-1");
}

BOOST_AUTO_TEST_CASE(task_frames_asking_for_bad_resources_are_refused) {
  // A task frame names the resources it waits for: junk there, a negative
  // amount, or more than the node has is refused, not queued forever.
  auto& cl = *the_cluster;
  int fd = admitted_data_connection("node-1");
  auto task_frame = [](const std::vector<char>& resources) {
    std::vector<char> out;
    auto add = [&out](const std::vector<char>& part) {
      auto n = static_cast<uint32_t>(part.size());
      out.insert(out.end(), reinterpret_cast<const char*>(&n),
                 reinterpret_cast<const char*>(&n) + sizeof(n));
      out.insert(out.end(), part.begin(), part.end());
    };
    add({'w', 'h', 'e', 'r', 'e'}); // no arguments follow
    add(resources);
    return out;
  };
  using amounts = std::map<std::string, double>;
  std::vector<std::vector<char>> bad{
    {1, 2, 3},                                   // not an encoded map
    lumen::detail::encode(amounts{{"gpu", -1}}), // negative
    lumen::detail::encode(amounts{{"gpu", 5}}),  // node-1 has none
    lumen::detail::encode(amounts{{"cpu", 1e9}}),
  };
  uint64_t id = 300;
  for (auto& r : bad) {
    auto reply = ask(fd, 1 /* task */, id, task_frame(r));
    BOOST_TEST(reply.kind == 3);
    BOOST_TEST(reply.ok == 0);
    BOOST_TEST(reply.id == id);
    ++id;
  }
  auto fine =
    ask(fd, 1, id, task_frame(lumen::detail::encode(amounts{{"cpu", 1}})));
  BOOST_TEST(fine.ok == 1);
  ::close(fd);
  BOOST_TEST(cl.nodes[0].proc->running());
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

BOOST_AUTO_TEST_SUITE_END()
