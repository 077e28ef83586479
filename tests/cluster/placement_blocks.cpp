// How typed messages' large blocks travel between processes: read in
// place in the frame, at the caller's landing, or through shared memory
// with a process of this host. Part of the placement suite
// (placement_test.cpp holds its cluster; node-2 keeps to its sockets).

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/lumen.hpp>
#include <lumen/reply_landing.hpp>

#include "cluster_fixture.hpp"
#include "cluster_job.hpp"

using namespace lumen::test;

namespace {

/// `n` bytes of a pattern that differs with `step`.
byte_block pattern_block(size_t n, size_t step) {
  byte_block b;
  b.own.resize(n);
  for (size_t i = 0; i < n; ++i)
    b.own[i] = static_cast<char>(i * step + 1);
  return b;
}

/// Whether `got` holds the bytes `sent` holds.
bool same_bytes(const byte_block& sent, const byte_block& got) {
  return got.size() == sent.own.size() &&
         std::equal(sent.own.begin(), sent.own.end(), got.data());
}

} // namespace

BOOST_AUTO_TEST_SUITE(placement)

BOOST_AUTO_TEST_CASE(large_blocks_of_typed_messages_are_read_in_place) {
  // The first block of a message is put where the receiver can view it in
  // the frame it came in (lumen::view_received_bytes); the second lands 3
  // bytes past a multiple of 8 (after 1 MiB and its 3-byte length) and is
  // copied instead. Either way the bytes arrive as sent, both ways.
  auto echo = lumen::spawn_on<block_echo>("node-1", "block_echo");
  auto a = pattern_block(size_t{1} << 20, 7);
  auto b = pattern_block(100003, 13);
  auto [a2, b2, a_viewed, b_viewed] =
    lumen::get(lumen::call(echo, echo_atom::value, a, b), deadline);
  BOOST_TEST(a_viewed);
  BOOST_TEST(!b_viewed);
  BOOST_TEST(a2.viewed != nullptr);
  BOOST_TEST(a2.frame != nullptr);
  BOOST_TEST(b2.viewed == nullptr);
  BOOST_TEST(same_bytes(a, a2));
  BOOST_TEST(same_bytes(b, b2));
  // Outside a decode from a frame, nothing is viewed.
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  BOOST_REQUIRE(!sink(a));
  byte_block local;
  caf::binary_deserializer source{nullptr, buf};
  BOOST_REQUIRE(!source(local));
  BOOST_TEST(local.viewed == nullptr);
  BOOST_TEST(local.own == a.own);
}

BOOST_AUTO_TEST_CASE(a_reply_landing_takes_the_answers_block_off_the_socket) {
  // The answer's first block is read straight into the caller's place
  // and viewed there; a landing of another size, an answer without a
  // large block, and the next request without a landing are read whole.
  // node-2 shares no memory with this process (cluster_fixture.hpp).
  auto echo = lumen::spawn_on<block_echo>("node-2", "block_echo");
  auto a = pattern_block(size_t{1} << 20, 5);
  auto b = pattern_block(100003, 11);
  auto place = std::make_shared<std::vector<char>>(a.own.size() + 64, 'x');
  auto ask = [&](size_t landing_size) {
    lumen::reply_landing here{place->data() + 16, landing_size, place};
    return lumen::get(lumen::call(echo, echo_atom::value, a, b), deadline);
  };
  auto check = [&](const byte_block& a2, const byte_block& b2) {
    BOOST_TEST(same_bytes(a, a2));
    BOOST_TEST(same_bytes(b, b2));
  };
  {
    auto [a2, b2, a_viewed, b_viewed] = ask(a.own.size());
    check(a2, b2);
    // Addresses, not strings: Boost.Test compares char pointers as text.
    auto landed = static_cast<const void*>(place->data() + 16);
    BOOST_TEST(static_cast<const void*>(a2.viewed) == landed); // no copy
    BOOST_TEST(a2.frame.get() == place.get()); // and kept alive by it
    BOOST_TEST(place->front() == 'x');         // nothing written around it
    BOOST_TEST(place->back() == 'x');
  }
  std::fill(place->begin(), place->end(), 'x');
  for (size_t wrong : {a.own.size() - 1, a.own.size() + 48}) {
    auto [a2, b2, a_viewed, b_viewed] = ask(wrong);
    check(a2, b2);
    BOOST_TEST(static_cast<const void*>(a2.data()) !=
               static_cast<const void*>(place->data() + 16));
  }
  {
    auto [a2, b2, a_viewed, b_viewed] =
      lumen::get(lumen::call(echo, echo_atom::value, a, b), deadline);
    check(a2, b2);
    BOOST_TEST(a2.frame.get() != place.get()); // the landing was used up
  }
  // An answer of no large block leaves the place alone.
  std::fill(place->begin(), place->end(), 'x');
  auto calc = lumen::spawn_on<calculator>("node-2", "calculator");
  {
    lumen::reply_landing here{place->data(), place->size(), place};
    BOOST_TEST(lumen::get(lumen::call(calc, add_atom::value, 2, 3), deadline) ==
               5);
  }
  BOOST_TEST(
    std::all_of(place->begin(), place->end(), [](char c) { return c == 'x'; }));
}

BOOST_AUTO_TEST_CASE(large_blocks_to_a_process_of_this_host_go_through_memory) {
  // node-1 maps this process's arena and this process node-1's: the
  // request's block is written once, into this process's arena, and read
  // there; the answer's is written by node-1 at the landing_buffer named
  // for it. Without a landing the answer is viewed in node-1's arena,
  // its slot kept while the answer is held.
  auto echo = lumen::spawn_on<block_echo>("node-1", "block_echo");
  auto a = pattern_block(size_t{1} << 20, 3);
  auto b = pattern_block(100003, 17); // below 256 KiB: on the socket
  auto before = lumen::shared_memory_counts_now();
  {
    auto place = lumen::landing_buffer(a.own.size());
    lumen::reply_landing here{place.get(), a.own.size(), place};
    auto [a2, b2, a_viewed, b_viewed] =
      lumen::get(lumen::call(echo, echo_atom::value, a, b), deadline);
    BOOST_TEST(same_bytes(a, a2));
    BOOST_TEST(same_bytes(b, b2));
    BOOST_TEST(a_viewed); // node-1 read the request's block in place
    BOOST_TEST(static_cast<const void*>(a2.viewed) ==
               static_cast<const void*>(place.get()));
    BOOST_TEST(a2.frame.get() == static_cast<const void*>(place.get()));
  }
  auto after = lumen::shared_memory_counts_now();
  BOOST_TEST(after.blocks_sent == before.blocks_sent + 1);
  BOOST_TEST(after.bytes_sent == before.bytes_sent + a.own.size());
  BOOST_TEST(after.answers_landed == before.answers_landed + 1);
  auto held = std::get<0>(
    lumen::get(lumen::call(echo, echo_atom::value, a, b), deadline));
  BOOST_TEST(held.frame != nullptr); // viewed where node-1 put it
  // More than an arena's worth of blocks each way, while one is held:
  // slots come back when let go, and the held one is never written over.
  auto c = pattern_block(size_t{3} << 20, 7);
  before = lumen::shared_memory_counts_now();
  constexpr uint64_t calls = 400; // 1.2 GB each way; an arena has 1 GiB
  for (uint64_t i = 0; i < calls; ++i) {
    auto [c2, b2, c_viewed, b_viewed] =
      lumen::get(lumen::call(echo, echo_atom::value, c, b), deadline);
    BOOST_REQUIRE(c2.size() == c.own.size());
    BOOST_REQUIRE(c2.data()[12345] == c.own[12345]);
  }
  after = lumen::shared_memory_counts_now();
  BOOST_TEST(after.blocks_sent == before.blocks_sent + calls);
  BOOST_TEST(same_bytes(a, held));
}
BOOST_AUTO_TEST_SUITE_END()
