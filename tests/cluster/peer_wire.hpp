#pragma once

// A peer of the cluster's ports as the security suites play it: a raw
// socket, the gate passed with the token where it should be, and frames
// of the data plane written by hand.

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <lumen/cluster.hpp>

#include "cluster_fixture.hpp"

namespace lumen::test {

/// The port of `address` (HOST:PORT) on loopback.
inline sockaddr_in loopback_port_of(const std::string& address) {
  auto colon = address.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port =
    htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  return addr;
}

/// A connection to `address` on loopback; -1 if it cannot be made.
inline int connect_to(const std::string& address) {
  auto addr = loopback_port_of(address);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{15, 0}; // a bound on every read below
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

inline std::string data_address_of(const std::string& id) {
  for (auto& n : lumen::nodes())
    if (n.id == id)
      return n.data_address;
  return {};
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
inline int admitted_data_connection(const std::string& id) {
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
inline frame_header ask(int fd, uint8_t kind, uint64_t id,
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
inline std::vector<char> u64_then(uint64_t value, std::vector<char> tail = {}) {
  std::vector<char> out;
  for (size_t i = 0; i < sizeof(value); ++i)
    out.push_back(static_cast<char>(value >> (8 * i)));
  for (char c : tail)
    out.push_back(c);
  return out;
}

} // namespace lumen::test
