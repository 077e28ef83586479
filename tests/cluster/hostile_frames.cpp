// Peers let in with the cluster's token, and then not trusted with a
// byte: malformed frames of every kind on the data port, each answered
// with an error or the link dropped, and the node serving on. Part of the
// security suite (security_test.cpp holds its cluster).

#include <boost/test/unit_test.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <lumen/caf_interop.hpp>
#include <lumen/detail/codec.hpp>
#include <lumen/lumen.hpp>

#include "cluster_fixture.hpp"
#include "cluster_job.hpp"
#include "peer_wire.hpp"

using namespace lumen::test;

namespace {

/// node-1 is still up, and runs a task.
void node_1_still_serves() {
  BOOST_TEST(the_cluster->nodes[0].proc->running());
  BOOST_TEST(lumen::get(lumen::task(where).on_node("node-1").remote(),
                        deadline) == "node-1");
}

} // namespace

BOOST_AUTO_TEST_SUITE(security)

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
  node_1_still_serves();
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
  node_1_still_serves();
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

BOOST_AUTO_TEST_SUITE_END()
