#include "security/gate.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "lumen/errors.hpp"

#include "core/error_table.hpp"
#include "security/gate_wire.hpp"
#include "security/token.hpp"
#include "transport/socket_io.hpp"

namespace lumen::detail {

namespace {

/// TLS handshakes tried before a link closed without a verdict fails.
constexpr int tls_tries = 4;

/// The alerts a TLS 1.3 server sends a client whose certificate it does
/// not take (RFC 8446, 6.2): bad, unsupported, revoked, expired or unknown
/// certificate, unknown CA, access denied, certificate required.
bool certificate_alert(int alert) {
  for (int a : {42, 43, 44, 45, 46, 48, 49, 116})
    if (alert == a)
      return true;
  return false;
}

tcp_ends ends_of(int fd) {
  tcp_ends out;
  sockaddr_storage at{};
  socklen_t len = sizeof at;
  char ip[INET6_ADDRSTRLEN] = {};
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&at), &len) == 0) {
    const void* raw = at.ss_family == AF_INET6
                        ? static_cast<const void*>(
                            &reinterpret_cast<sockaddr_in6*>(&at)->sin6_addr)
                        : &reinterpret_cast<sockaddr_in*>(&at)->sin_addr;
    if (::inet_ntop(at.ss_family, raw, ip, sizeof ip))
      out.peer_ip = ip;
  }
  len = sizeof at;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len) == 0)
    out.local_port = ntohs(at.ss_family == AF_INET6
                             ? reinterpret_cast<sockaddr_in6*>(&at)->sin6_port
                             : reinterpret_cast<sockaddr_in*>(&at)->sin_port);
  return out;
}

} // namespace

gated_socket pass_gate(const address& where, const credentials& creds,
                       const std::string& what,
                       std::chrono::milliseconds timeout, tcp_ends* ends) {
  const auto& token = creds.token;
  auto unreachable = [&](const std::string& why) {
    return error("cannot reach " + what + " at " + where.to_string() + " (" +
                   why + "); is it running? `lumen status` lists the cluster",
                 errc::unreachable);
  };
  if (token.empty() || token.size() > max_token_size)
    throw usage_error("the cluster token must have 1 to " +
                        std::to_string(max_token_size) + " characters",
                      errc::bad_token_file);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(
        where.host.c_str(), std::to_string(where.port).c_str(), &hints, &found);
      rc != 0)
    throw unreachable(std::string{"the host does not resolve: "} +
                      ::gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard{found, ::freeaddrinfo};
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left_ms = [&] {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    return std::max<long>(1, static_cast<long>(left.count()));
  };
  // A TCP connection, in blocking mode; throws `unreachable` if none.
  auto connect_tcp = [&] {
    int fd =
      ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
      throw unreachable(std::strerror(errno));
    auto fail = [&](const std::string& why) {
      ::close(fd);
      return unreachable(why);
    };
    if (::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
      if (errno != EINPROGRESS)
        throw fail(std::strerror(errno));
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(left_ms())) != 1)
        throw fail("no answer within " + std::to_string(timeout.count()) +
                   " ms");
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0)
        throw fail(std::strerror(err));
    }
    set_blocking(fd);
    set_no_delay(fd);
    if (ends)
      *ends = ends_of(fd);
    return fd;
  };
  gated_socket link{connect_tcp()};
  // A gate under a flood of strangers may drop a link whose TLS handshake
  // is under way to make room: a link closed before any verdict is tried
  // again while there is time, a few times.
  for (int tries = 1; creds.tls; ++tries) {
    auto secured = creds.tls->connect(link.fd, deadline);
    if (secured.records) {
      link.tls = std::move(secured.records);
      break;
    }
    if (secured.refused)
      std::rethrow_exception(make_error(
        creds.tls->uses_certificates() ? errc::tls_mismatch : errc::wrong_token,
        what + " at " + where.to_string() +
          " and this process could not agree on TLS keys (" + secured.why +
          "): " +
          (creds.tls->uses_certificates()
             ? "one's certificate is not signed by the other's "
               "CA; use the cluster's --tls-cert, --tls-key "
               "and --tls-ca"
             : "this process's key comes from another token; "
               "use the token file the head wrote with "
               "--token-file or LUMEN_TOKEN_FILE")));
    if (tries == tls_tries || std::chrono::steady_clock::now() >= deadline)
      throw error("cannot reach " + what + " at " + where.to_string() + " (" +
                    secured.why +
                    (tries > 1 ? ", " + std::to_string(tries) + " tries"
                               : std::string{}) +
                    ")",
                  errc::unreachable);
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * tries));
    link = gated_socket{connect_tcp()};
  }
  set_socket_timeout(link.fd, std::chrono::milliseconds(left_ms()), true);
  std::string hello(gate_magic.begin(), gate_magic.end());
  hello.resize(greeting_size);
  put_u16(hello.data() + gate_magic.size(), token.size());
  hello += token;
  std::array<char, 3> verdict{};
  bool sent = write_all(link, hello.data(), hello.size());
  // Read even if the hello did not go out: a gate that refused this
  // process's certificate said why before it closed.
  bool answered = read_all(link, verdict.data(), verdict.size());
  if (!sent || !answered) {
    if (link.tls && certificate_alert(link.tls->alert()))
      throw error(what + " at " + where.to_string() +
                    " did not accept this process's certificate (" +
                    link.tls->why() +
                    "): use a certificate its --tls-ca signed, with "
                    "--tls-cert and --tls-key",
                  errc::tls_mismatch);
    throw unreachable("it ended the handshake: not a Lumen port, too busy, or "
                      "too slow");
  }
  std::string reason(std::min(get_u16(verdict.data() + 1), max_reason), '\0');
  if (!read_all(link, reason.data(), reason.size()))
    throw unreachable("it ended the handshake");
  if (static_cast<uint8_t>(verdict[0]) != verdict_admitted) {
    bool tls = reason == tls_required_reason;
    std::rethrow_exception(make_error(
      tls                            ? errc::tls_mismatch
      : reason == wrong_token_reason ? errc::wrong_token
                                     : errc::unreachable,
      what + " at " + where.to_string() + " refused this process: " + reason +
        (tls ? std::string{}
             : "; use the token file the head wrote (`lumen start "
               "--head` prints its path) with --token-file or "
               "LUMEN_TOKEN_FILE")));
  }
  set_socket_timeout(link.fd, std::chrono::milliseconds(0), true);
  return link;
}

} // namespace lumen::detail
