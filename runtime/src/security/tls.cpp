#include "security/tls.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
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

/// Where a context keeps its key for the callbacks (asio has the context's
/// app data for itself).
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
void configure(asio::ssl::context& ctx, const tls_options& opts,
               const std::array<unsigned char, 32>* psk) {
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_3_VERSION);
  if (psk != nullptr) {
    SSL_CTX_set_ciphersuites(ctx.native_handle(), psk_suites);
    void* key = const_cast<std::array<unsigned char, 32>*>(psk);
    SSL_CTX_set_ex_data(ctx.native_handle(), psk_index(), key);
    return;
  }
  auto use = [](const std::string& flag, const std::string& file, auto&& fn) {
    error_code ec;
    fn(ec);
    if (ec)
      throw usage_error("cannot use " + flag + " " + file + " (" +
                          ec.message() + "); give a PEM file",
                        errc::tls_mismatch);
  };
  use("--tls-cert", opts.cert_file, [&](error_code& ec) {
    ctx.use_certificate_chain_file(opts.cert_file, ec);
  });
  use("--tls-key", opts.key_file, [&](error_code& ec) {
    ctx.use_private_key_file(opts.key_file, asio::ssl::context::pem, ec);
  });
  if (SSL_CTX_check_private_key(ctx.native_handle()) != 1)
    throw usage_error("--tls-key " + opts.key_file +
                        " is not the key of --tls-cert " + opts.cert_file,
                      errc::tls_mismatch);
  use("--tls-ca", opts.ca_file,
      [&](error_code& ec) { ctx.load_verify_file(opts.ca_file, ec); });
  ctx.set_verify_mode(asio::ssl::verify_peer |
                      asio::ssl::verify_fail_if_no_peer_cert);
}

/// Moves bytes both ways between a TLS session and a local socket.
class relay_pair : public std::enable_shared_from_this<relay_pair> {
public:
  relay_pair(tls_stream tls, asio::local::stream_protocol::socket local)
    : tls_(std::move(tls))
    , local_(std::move(local)) {}

  void start() {
    copy(tls_, local_, in_);  // peer -> this process
    copy(local_, tls_, out_); // this process -> peer
  }

private:
  using buffer = std::array<char, 64 * 1024>;

  /// Reads what `from` has into `buf`, writes it all to `to`, and again,
  /// until either side ends.
  template <class From, class To>
  void copy(From& from, To& to, buffer& buf) {
    from.async_read_some(
      asio::buffer(buf),
      [self = shared_from_this(), &from, &to, &buf](error_code ec, size_t n) {
        if (ec)
          return self->end();
        asio::async_write(to, asio::buffer(buf.data(), n),
                          [self, &from, &to, &buf](error_code e, size_t) {
                            if (e)
                              return self->end();
                            self->copy(from, to, buf);
                          });
      });
  }

  // Either side ended: so does the other; what was written got through.
  void end() {
    error_code ec;
    local_.close(ec);
    tls_.lowest_layer().close(ec);
  }

  tls_stream tls_;
  asio::local::stream_protocol::socket local_;
  buffer in_;
  buffer out_;
};

std::string describe(const error_code& ec) {
  // A plain gate drops a TLS greeting unread: the link ends or is reset.
  if (ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::ssl::error::stream_truncated)
    return "it closed the link during the TLS handshake: it runs without "
           "--tls, or is too busy to let this process in";
  return "TLS handshake failed: " + ec.message();
}

/// A handshake error that is a verdict, not a broken link: the peer sent
/// an alert (it rejected this process's key or certificate), or this
/// process rejected the peer's certificate.
bool refused(const error_code& ec) {
  if (ec.category() != asio::error::get_ssl_category())
    return false;
  auto reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
  return reason > SSL_AD_REASON_OFFSET ||
         reason == SSL_R_CERTIFICATE_VERIFY_FAILED;
}

} // namespace

int relay(tls_stream tls) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return -1;
  auto io = tls.get_executor();
  asio::local::stream_protocol::socket local{io};
  error_code ec;
  local.assign(asio::local::stream_protocol{}, fds[0], ec);
  if (ec) {
    ::close(fds[0]);
    ::close(fds[1]);
    return -1;
  }
  try {
    std::make_shared<relay_pair>(std::move(tls), std::move(local))->start();
  } catch (const std::exception&) {
    ::close(fds[1]); // fds[0] is the local socket's, closed with it
    return -1;
  }
  return fds[1];
}

tls_context::tls_context(const tls_options& opts, const std::string& token)
  : certificates_(!opts.cert_file.empty())
  , server_(asio::ssl::context::tls_server)
  , client_(asio::ssl::context::tls_client) {
  if (!certificates_)
    psk_ = derive_psk(token);
  configure(server_, opts, certificates_ ? nullptr : &psk_);
  configure(client_, opts, certificates_ ? nullptr : &psk_);
  if (!certificates_) {
    SSL_CTX_set_psk_server_callback(server_.native_handle(), psk_server);
    SSL_CTX_set_psk_client_callback(client_.native_handle(), psk_client);
    // Trusting no certificate at all, a client only finishes a handshake
    // keyed by the token: a server that offers a certificate instead (one
    // that does not know the token) never gets to hear it.
    client_.set_verify_mode(asio::ssl::verify_peer);
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
  std::promise<tls_outcome> done;
  asio::post(io_, [&] {
    bool owned = false; // by the TLS stream, which closes it
    try {
      start_client(fd, deadline, done, owned);
    } catch (const std::exception& e) {
      if (!owned)
        ::close(fd);
      done.set_value({-1, std::string{"TLS: "} + e.what(), false});
    }
  });
  return done.get_future().get();
}

void tls_context::start_client(int fd,
                               std::chrono::steady_clock::time_point deadline,
                               std::promise<tls_outcome>& done, bool& owned) {
  sockaddr_storage me{};
  socklen_t len = sizeof(me);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len);
  auto proto = me.ss_family == AF_INET6 ? tcp::v6() : tcp::v4();
  auto tls = std::make_shared<tls_stream>(io_, client_);
  error_code ec;
  tls->next_layer().assign(proto, fd, ec);
  if (ec) {
    ::close(fd);
    owned = true; // closed: the caller must not close it again
    return done.set_value({-1, "TLS: " + ec.message(), false});
  }
  owned = true;
  auto timer = std::make_shared<asio::steady_timer>(io_, deadline);
  auto late = std::make_shared<bool>(false);
  timer->async_wait([tls, late](error_code e) {
    if (e)
      return;
    *late = true;
    tls->lowest_layer().close(e);
  });
  tls->async_handshake(
    asio::ssl::stream_base::client, [&done, tls, timer, late](error_code e) {
      timer->cancel();
      if (*late)
        return done.set_value({-1, "no TLS handshake in time", false});
      if (e)
        return done.set_value({-1, describe(e), refused(e)});
      int plain = relay(std::move(*tls));
      if (plain < 0)
        return done.set_value({-1, "out of descriptors", false});
      done.set_value({plain, {}, false});
    });
}

} // namespace lumen::detail
