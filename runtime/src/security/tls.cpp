#include "security/tls.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "lumen/errors.hpp"

namespace lumen::detail {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

// TLS 1.3 with a pre-shared key needs a suite whose hash matches the key's
// (SHA-256); AES-GCM first, for CPUs with AES instructions.
constexpr const char* psk_suites =
  "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256";
constexpr const char* psk_identity = "lumen";

/// Where a context keeps its key for the callbacks.
int psk_index() {
  static const int index =
    SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

struct psk_slot {
  static unsigned copy(SSL* ssl, unsigned char* out, unsigned max) {
    auto* key = static_cast<const std::array<unsigned char, 32>*>(
      SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), psk_index()));
    if (key == nullptr || max < key->size())
      return 0;
    std::memcpy(out, key->data(), key->size());
    return static_cast<unsigned>(key->size());
  }
};

unsigned psk_server(SSL* ssl, const char*, unsigned char* psk, unsigned max) {
  return psk_slot::copy(ssl, psk, max);
}

unsigned psk_client(SSL* ssl, const char*, char* identity,
                    unsigned max_identity, unsigned char* psk, unsigned max) {
  if (std::strlen(psk_identity) + 1 > max_identity)
    return 0;
  std::strcpy(identity, psk_identity);
  return psk_slot::copy(ssl, psk, max);
}

std::array<unsigned char, 32> derive_psk(const std::string& token) {
  // A label keeps this key apart from any other use of the token.
  std::string input = "lumen tls pre-shared key v1\n" + token;
  std::array<unsigned char, 32> key{};
  unsigned len = 0;
  if (EVP_Digest(input.data(), input.size(), key.data(), &len, EVP_sha256(),
                 nullptr) != 1 ||
      len != key.size())
    throw error("cannot derive the TLS key from the cluster token (OpenSSL "
                "failed)",
                errc::tls_mismatch);
  return key;
}

/// Applies what both sides share: TLS 1.3 only, and the keys.
void configure(SSL_CTX* ctx, const tls_options& opts,
               const std::array<unsigned char, 32>* psk) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  if (psk != nullptr) {
    SSL_CTX_set_ciphersuites(ctx, psk_suites);
    SSL_CTX_set_ex_data(ctx, psk_index(),
                        const_cast<std::array<unsigned char, 32>*>(psk));
    return;
  }
  auto use = [](const std::string& flag, const std::string& file, bool ok) {
    if (!ok)
      throw usage_error("cannot use " + flag + " " + file + " (" +
                          openssl_error() + "); give a PEM file",
                        errc::tls_mismatch);
  };
  use("--tls-cert", opts.cert_file,
      SSL_CTX_use_certificate_chain_file(ctx, opts.cert_file.c_str()) == 1);
  use("--tls-key", opts.key_file,
      SSL_CTX_use_PrivateKey_file(ctx, opts.key_file.c_str(),
                                  SSL_FILETYPE_PEM) == 1);
  if (SSL_CTX_check_private_key(ctx) != 1)
    throw usage_error("--tls-key " + opts.key_file +
                        " is not the key of --tls-cert " + opts.cert_file,
                      errc::tls_mismatch);
  use("--tls-ca", opts.ca_file,
      SSL_CTX_load_verify_locations(ctx, opts.ca_file.c_str(), nullptr) == 1);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                     nullptr);
}

/// Moves bytes both ways between a link's records and a local socket.
class relay_pair : public std::enable_shared_from_this<relay_pair> {
public:
  relay_pair(tcp::socket tcp, std::unique_ptr<tls_records> records,
             asio::local::stream_protocol::socket local)
    : tcp_(std::move(tcp))
    , records_(std::move(records))
    , local_(std::move(local)) {}

  void start() {
    from_peer();
    to_peer();
  }

private:
  void from_peer() {
    size_t n = records_->take(in_.data(), in_.size());
    if (n > 0)
      return asio::async_write(
        local_, asio::buffer(in_.data(), n),
        [self = shared_from_this()](error_code ec, size_t) {
          if (ec)
            return self->end();
          self->from_peer();
        });
    if (records_->failed())
      return end();
    auto room = records_->raw_space();
    tcp_.async_read_some(asio::buffer(room.iov_base, room.iov_len),
                         [self = shared_from_this()](error_code ec, size_t k) {
                           if (ec)
                             return self->end();
                           self->records_->raw_came(k);
                           self->from_peer();
                         });
  }

  void to_peer() {
    local_.async_read_some(
      asio::buffer(out_), [self = shared_from_this()](error_code ec, size_t n) {
        if (ec)
          return self->end();
        self->sealed_.clear();
        if (!self->records_->seal(self->out_.data(), n, self->sealed_))
          return self->end();
        asio::async_write(self->tcp_, asio::buffer(self->sealed_),
                          [self](error_code e, size_t) {
                            if (e)
                              return self->end();
                            self->to_peer();
                          });
      });
  }

  // Either side ended: so does the other; what was written got through.
  void end() {
    error_code ec;
    local_.close(ec);
    tcp_.close(ec);
  }

  tcp::socket tcp_;
  std::unique_ptr<tls_records> records_;
  asio::local::stream_protocol::socket local_;
  std::array<char, 64 * 1024> in_;
  std::array<char, 64 * 1024> out_;
  std::vector<char> sealed_;
};

} // namespace

tls_context::tls_context(const tls_options& opts, const std::string& token)
  : certificates_(!opts.cert_file.empty())
  , server_(SSL_CTX_new(TLS_server_method()), SSL_CTX_free)
  , client_(SSL_CTX_new(TLS_client_method()), SSL_CTX_free) {
  if (!server_ || !client_)
    throw error("cannot set up TLS (OpenSSL: " + openssl_error() + ")",
                errc::tls_mismatch);
  if (!certificates_)
    psk_ = derive_psk(token);
  for (auto* ctx : {server_.get(), client_.get()}) {
    configure(ctx, opts, certificates_ ? nullptr : &psk_);
    SSL_CTX_set_keylog_callback(ctx, &tls_handshake::keep_secret);
  }
  // Tickets would be records the peer's record layer is not counting on
  // (and Lumen never resumes a session).
  SSL_CTX_set_num_tickets(server_.get(), 0);
  if (!certificates_) {
    SSL_CTX_set_psk_server_callback(server_.get(), psk_server);
    SSL_CTX_set_psk_client_callback(client_.get(), psk_client);
    // Trusting no certificate at all, a client only finishes a handshake
    // keyed by the token: a server that offers a certificate instead (one
    // that does not know the token) never gets to hear it.
    SSL_CTX_set_verify(client_.get(), SSL_VERIFY_PEER, nullptr);
  }
  loop_ = std::thread{[this] {
    auto work = asio::make_work_guard(io_);
    // A handler that throws (out of memory, say) fails its link, not the
    // process nor the other links.
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception&) {
      }
    }
  }};
}

tls_context::~tls_context() {
  io_.stop();
  loop_.join();
}

tls_outcome
tls_context::connect(int fd, std::chrono::steady_clock::time_point deadline) {
  using namespace std::chrono;
  tls_outcome out;
  // Non-blocking, waiting for the socket with what is left: a peer that
  // trickles a byte now and then cannot hold the handshake past `deadline`.
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  try {
    tls_handshake hs{*this, fd, false};
    for (auto s = hs.step(); s != tls_handshake::state::done; s = hs.step()) {
      if (s == tls_handshake::state::failed) {
        out.why = hs.why();
        out.refused = hs.refused();
        break;
      }
      auto left = duration_cast<milliseconds>(deadline - steady_clock::now());
      pollfd ready{fd,
                   static_cast<short>(
                     s == tls_handshake::state::wants_read ? POLLIN : POLLOUT),
                   0};
      if (left.count() <= 0 ||
          (::poll(&ready, 1, static_cast<int>(left.count())) == 0 &&
           steady_clock::now() >= deadline)) {
        out.why = "no TLS handshake in time";
        break;
      }
    }
    if (out.why.empty())
      out.records = hs.records();
  } catch (const error& e) {
    // A suite or secret Lumen cannot take: the two sides cannot agree.
    out.why = e.what();
    out.refused = true;
  } catch (const std::exception& e) {
    out.why = std::string{"TLS: "} + e.what();
  }
  ::fcntl(fd, F_SETFL, flags);
  return out;
}

int tls_context::relay(gated_socket s) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return -1;
  try {
    sockaddr_storage me{};
    socklen_t len = sizeof(me);
    ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&me), &len);
    tcp::socket link{io_};
    link.assign(me.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), s.fd);
    s.release();
    asio::local::stream_protocol::socket local{io_};
    local.assign(asio::local::stream_protocol{}, fds[0]);
    fds[0] = -1; // the socket's now
    auto pair = std::make_shared<relay_pair>(std::move(link), std::move(s.tls),
                                             std::move(local));
    // Started on the loop, which runs all of the pair's handlers.
    asio::post(io_, [pair] { pair->start(); });
  } catch (const std::exception&) {
    for (int fd : {fds[0], fds[1]})
      if (fd >= 0)
        ::close(fd);
    return -1;
  }
  return fds[1];
}

int as_plain_socket(gated_socket s, tls_context* tls) {
  if (!s.tls)
    return s.release();
  return tls != nullptr ? tls->relay(std::move(s)) : -1;
}

std::string openssl_error() {
  auto e = ERR_peek_last_error();
  const char* reason = e != 0 ? ERR_reason_error_string(e) : nullptr;
  return reason != nullptr ? reason : "unknown OpenSSL error";
}

} // namespace lumen::detail
