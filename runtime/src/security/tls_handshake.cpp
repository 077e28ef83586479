#include "security/tls.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>

#include "lumen/errors.hpp"

// One side of a TLS handshake, and the record keys it leaves.

namespace lumen::detail {

namespace {

/// Where a session keeps its handshake's secrets for the keylog callback.
int secrets_index() {
  static const int index =
    SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// A socket BIO whose writes never raise SIGPIPE (OpenSSL's own writes with
// write(2)): a peer that leaves mid-handshake must not end this process.
int socket_of(BIO* b) {
  return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b)));
}

int retry_or_fail(BIO* b, ssize_t n, bool reading) {
  BIO_clear_retry_flags(b);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    if (reading)
      BIO_set_retry_read(b);
    else
      BIO_set_retry_write(b);
  }
  return static_cast<int>(n);
}

int bio_write(BIO* b, const char* data, int n) {
  auto k = ::send(socket_of(b), data, static_cast<size_t>(n), MSG_NOSIGNAL);
  return retry_or_fail(b, k, false);
}

int bio_read(BIO* b, char* data, int n) {
  auto k = ::recv(socket_of(b), data, static_cast<size_t>(n), 0);
  return retry_or_fail(b, k, true);
}

long bio_ctrl(BIO*, int cmd, long, void*) {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

int bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

BIO* socket_bio(int fd) {
  static BIO_METHOD* method = [] {
    auto* m =
      BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "lumen socket");
    if (m != nullptr) {
      BIO_meth_set_write(m, bio_write);
      BIO_meth_set_read(m, bio_read);
      BIO_meth_set_ctrl(m, bio_ctrl);
      BIO_meth_set_create(m, bio_create);
    }
    return m;
  }();
  BIO* b = method != nullptr ? BIO_new(method) : nullptr;
  if (b != nullptr)
    BIO_set_data(b, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  return b;
}

unsigned char from_hex(char c) {
  return static_cast<unsigned char>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
}

/// HKDF-Expand-Label (RFC 8446, 7.1) with an empty context, for outputs no
/// longer than the hash: one HMAC block.
void expand_label(const EVP_MD* md, const std::vector<unsigned char>& secret,
                  const std::string& label, unsigned char* out, size_t len) {
  std::string full = "tls13 " + label;
  std::string info;
  info += static_cast<char>(len >> 8);
  info += static_cast<char>(len);
  info += static_cast<char>(full.size());
  info += full;
  info += '\0'; // the context's length
  info += '\1'; // HKDF-Expand's block counter
  unsigned char block[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (HMAC(md, secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(info.data()), info.size(),
           block, &n) == nullptr ||
      n < len)
    throw error("cannot derive the TLS record keys (OpenSSL failed)",
                errc::tls_mismatch);
  std::memcpy(out, block, len);
  OPENSSL_cleanse(block, sizeof(block));
}

} // namespace

/// The traffic secrets OpenSSL hands its keylog callback (the only public
/// way to them), kept for `records()`.
struct tls_handshake::secrets {
  std::vector<unsigned char> client, server;

  static void keep(const SSL* ssl, const char* line) {
    auto* self = static_cast<secrets*>(SSL_get_ex_data(ssl, secrets_index()));
    if (self == nullptr)
      return;
    std::string text{line};
    auto take = [&](const std::string& label, std::vector<unsigned char>& to) {
      if (text.rfind(label + " ", 0) != 0)
        return;
      auto hex = text.substr(text.find_last_of(' ') + 1);
      to.clear();
      for (size_t i = 0; i + 1 < hex.size(); i += 2)
        to.push_back(static_cast<unsigned char>(from_hex(hex[i]) << 4 |
                                                from_hex(hex[i + 1])));
    };
    take("CLIENT_TRAFFIC_SECRET_0", self->client);
    take("SERVER_TRAFFIC_SECRET_0", self->server);
  }
};

tls_handshake::tls_handshake(tls_context& ctx, int fd, bool server)
  : ssl_(SSL_new(server ? ctx.server_.get() : ctx.client_.get()))
  , server_(server)
  , secrets_(std::make_unique<secrets>()) {
  BIO* bio = ssl_ != nullptr ? socket_bio(fd) : nullptr;
  if (bio == nullptr) {
    SSL_free(ssl_);
    throw std::bad_alloc{};
  }
  SSL_set_bio(ssl_, bio, bio);
  SSL_set_ex_data(ssl_, secrets_index(), secrets_.get());
  if (server)
    SSL_set_accept_state(ssl_);
  else
    SSL_set_connect_state(ssl_);
}

tls_handshake::~tls_handshake() {
  SSL_free(ssl_); // sends nothing; the socket is the caller's
  OPENSSL_cleanse(secrets_->client.data(), secrets_->client.size());
  OPENSSL_cleanse(secrets_->server.data(), secrets_->server.size());
}

tls_handshake::state tls_handshake::step() {
  ERR_clear_error();
  errno = 0;
  int rc = SSL_do_handshake(ssl_);
  if (rc == 1)
    return state::done;
  int err = SSL_get_error(ssl_, rc);
  if (err == SSL_ERROR_WANT_READ)
    return state::wants_read;
  if (err == SSL_ERROR_WANT_WRITE)
    return state::wants_write;
  auto e = ERR_peek_last_error();
  auto reason = ERR_GET_REASON(e);
  // An alert from the peer (it rejected this side's key or certificate),
  // or this side rejecting the peer's certificate: a verdict, not a
  // broken link.
  refused_ = e != 0 && (reason > SSL_AD_REASON_OFFSET ||
                        reason == SSL_R_CERTIFICATE_VERIFY_FAILED);
  // A plain gate drops a TLS greeting unread: the link ends or is reset.
  bool ended = (err == SSL_ERROR_SYSCALL &&
                (errno == 0 || errno == ECONNRESET || errno == EPIPE)) ||
               err == SSL_ERROR_ZERO_RETURN ||
               reason == SSL_R_UNEXPECTED_EOF_WHILE_READING;
  why_ = ended && server_ ? "it left during the TLS handshake"
         : ended ? "it closed the link during the TLS handshake: it runs "
                   "without --tls, or is too busy to let this process in"
         : err == SSL_ERROR_SYSCALL
           ? std::string{"TLS handshake failed: "} + std::strerror(errno)
           : "TLS handshake failed: " + openssl_error();
  return state::failed;
}

std::unique_ptr<tls_records> tls_handshake::records() {
  const SSL_CIPHER* suite = SSL_get_current_cipher(ssl_);
  const EVP_MD* md = suite ? SSL_CIPHER_get_handshake_digest(suite) : nullptr;
  const EVP_CIPHER* cipher = nullptr;
  switch (suite ? SSL_CIPHER_get_id(suite) & 0xffff : 0) {
    case 0x1301:
      cipher = EVP_aes_128_gcm();
      break;
    case 0x1302:
      cipher = EVP_aes_256_gcm();
      break;
    case 0x1303:
      cipher = EVP_chacha20_poly1305();
      break;
  }
  if (cipher == nullptr || md == nullptr)
    throw error(std::string{"a TLS link agreed on a suite Lumen does not "
                            "seal itself ("} +
                  (suite ? SSL_CIPHER_get_name(suite) : "none") +
                  "); Lumen's peers use AES-GCM or ChaCha20-Poly1305",
                errc::tls_mismatch);
  if (secrets_->client.empty() || secrets_->server.empty())
    throw error("OpenSSL did not hand over the TLS session's traffic "
                "secrets (its keylog callback)",
                errc::tls_mismatch);
  // Records read past the handshake would be lost to Lumen's record
  // layer; OpenSSL reads one record at a time, so there are none.
  if (SSL_has_pending(ssl_) == 1)
    throw error("OpenSSL read past the TLS handshake", errc::tls_mismatch);
  auto key_of = [&](const std::vector<unsigned char>& secret) {
    tls_traffic_key k;
    k.cipher = cipher;
    expand_label(md, secret, "key", k.key.data(),
                 static_cast<size_t>(EVP_CIPHER_get_key_length(cipher)));
    expand_label(md, secret, "iv", k.iv.data(), k.iv.size());
    return k;
  };
  auto mine = key_of(server_ ? secrets_->server : secrets_->client);
  auto theirs = key_of(server_ ? secrets_->client : secrets_->server);
  auto records = std::make_unique<tls_records>(mine, theirs);
  for (auto* k : {&mine, &theirs})
    OPENSSL_cleanse(k, sizeof(*k));
  return records;
}

void tls_handshake::keep_secret(const SSL* ssl, const char* line) {
  secrets::keep(ssl, line);
}

} // namespace lumen::detail
