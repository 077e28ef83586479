#include "security/tls_records.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "transport/socket_io.hpp"

namespace lumen::detail {

namespace {

// RFC 8446, 5.1-5.2: a record is a 5-byte header (type, version 3.3,
// length) and the sealed inner plaintext (the data, then its real type),
// followed by the AEAD's tag.
constexpr size_t header_size = 5;
constexpr size_t tag_size = 16;
constexpr size_t max_plain = 16384;
constexpr size_t max_body = max_plain + 256;
constexpr size_t max_record = header_size + max_body;
// RFC 8446, 5.5: AES-GCM keeps its promises for about 2^24.5 full
// records under one key. Lumen's peers do not update keys: a link ends
// before that (275 GB each way), and its user's next request opens another.
constexpr uint64_t max_records = uint64_t{1} << 24;
constexpr unsigned char application_data = 23;
constexpr unsigned char alert_record = 21;

// Records sealed before a send: one system call carries several, and the
// peer starts opening the first while the rest are sealed.
constexpr size_t send_batch = 64 * 1024;
// What one receive may bring.
constexpr size_t receive_room = 256 * 1024;

int as_int(size_t n) {
  return static_cast<int>(n);
}

unsigned char* bytes_of(void* p) {
  return static_cast<unsigned char*>(p);
}

} // namespace

struct tls_records::direction {
  EVP_CIPHER_CTX* ctx;
  std::array<unsigned char, 12> iv;
  uint64_t sequence = 0;

  direction(const tls_traffic_key& k, bool sealing)
    : ctx(EVP_CIPHER_CTX_new())
    , iv(k.iv) {
    auto* cipher = static_cast<const EVP_CIPHER*>(k.cipher);
    if (ctx == nullptr || cipher == nullptr ||
        EVP_CipherInit_ex(ctx, cipher, nullptr, k.key.data(), nullptr,
                          sealing ? 1 : 0) != 1) {
      EVP_CIPHER_CTX_free(ctx);
      throw std::bad_alloc{};
    }
  }

  ~direction() {
    EVP_CIPHER_CTX_free(ctx);
    OPENSSL_cleanse(iv.data(), iv.size());
  }

  direction(const direction&) = delete;
  direction& operator=(const direction&) = delete;

  /// Begins the next record: its nonce (the IV with the record's number
  /// folded into its last 8 bytes) and the header as associated data;
  /// false past the records one key may seal, or if OpenSSL failed.
  bool begin(const unsigned char* header) {
    if (sequence >= max_records)
      return false;
    auto nonce = iv;
    for (int i = 0; i < 8; ++i)
      nonce[4 + static_cast<size_t>(i)] ^=
        static_cast<unsigned char>(sequence >> (56 - 8 * i));
    ++sequence;
    int n = 0;
    return EVP_CipherInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data(),
                             -1) == 1 &&
           EVP_CipherUpdate(ctx, nullptr, &n, header, as_int(header_size)) == 1;
  }
};

namespace {

void drop_empty(iovec*& iov, int& count) {
  while (count > 0 && iov->iov_len == 0) {
    ++iov;
    --count;
  }
}

} // namespace

size_t tls_records::seal_record(direction& d, iovec*& iov, int& count,
                                char* out) {
  size_t plain = 0;
  for (int i = 0; i < count && plain < max_plain; ++i)
    plain += std::min(iov[i].iov_len, max_plain - plain);
  size_t body = plain + 1 + tag_size;
  auto* header = bytes_of(out);
  header[0] = application_data;
  header[1] = 3;
  header[2] = 3;
  header[3] = static_cast<unsigned char>(body >> 8);
  header[4] = static_cast<unsigned char>(body);
  bool ok = d.begin(header);
  auto* c = header + header_size;
  int n = 0;
  for (size_t left = plain; left > 0;) {
    size_t k = std::min(iov->iov_len, left);
    ok = ok && EVP_EncryptUpdate(d.ctx, c, &n, bytes_of(iov->iov_base),
                                 as_int(k)) == 1;
    c += k;
    left -= k;
    iov->iov_base = static_cast<char*>(iov->iov_base) + k;
    iov->iov_len -= k;
    drop_empty(iov, count);
  }
  unsigned char type = application_data;
  ok = ok && EVP_EncryptUpdate(d.ctx, c, &n, &type, 1) == 1;
  c += 1;
  ok =
    ok && EVP_EncryptFinal_ex(d.ctx, c, &n) == 1 && n == 0 &&
    EVP_CIPHER_CTX_ctrl(d.ctx, EVP_CTRL_AEAD_GET_TAG, as_int(tag_size), c) == 1;
  return ok ? header_size + body : 0;
}

tls_records::tls_records(const tls_traffic_key& sending,
                         const tls_traffic_key& reading)
  : out_(std::make_unique<direction>(sending, true))
  , in_(std::make_unique<direction>(reading, false)) {}

tls_records::~tls_records() = default;

bool tls_records::write(int fd, iovec* iov, int count) {
  if (sealed_.size() < send_batch + max_record)
    sealed_.resize(send_batch + max_record);
  size_t used = 0;
  for (drop_empty(iov, count); count > 0;) {
    auto k = seal_record(*out_, iov, count, sealed_.data() + used);
    if (k == 0)
      return false;
    used += k;
    if (used >= send_batch) {
      if (!write_all(fd, sealed_.data(), used))
        return false;
      used = 0;
    }
  }
  return used == 0 || write_all(fd, sealed_.data(), used);
}

bool tls_records::seal(const char* data, size_t n, std::vector<char>& out) {
  iovec piece{const_cast<char*>(data), n};
  iovec* iov = &piece;
  int count = 1;
  for (drop_empty(iov, count); count > 0;) {
    size_t at = out.size();
    out.resize(at + max_record);
    auto k = seal_record(*out_, iov, count, out.data() + at);
    out.resize(at + k);
    if (k == 0)
      return false;
  }
  return true;
}

size_t tls_records::take(char* at, size_t n) {
  size_t got = 0;
  while (got < n && !failed()) {
    if (plain_at_ < plain_end_) {
      size_t k = std::min(n - got, plain_end_ - plain_at_);
      std::memcpy(at + got, raw_.data() + plain_at_, k);
      plain_at_ += k;
      got += k;
      continue;
    }
    if (raw_end_ - raw_at_ < header_size)
      break;
    auto* header = bytes_of(raw_.data() + raw_at_);
    size_t body = size_t{header[3]} << 8 | header[4];
    if (header[0] != application_data || header[1] != 3 || header[2] != 3 ||
        body < 1 + tag_size || body > max_body) {
      why_ = "a TLS record with a malformed header: not this link's peer";
      break;
    }
    if (raw_end_ - raw_at_ < header_size + body)
      break;
    // Lumen's peers never pad: the data is all but the type and the tag.
    size_t plain = body - 1 - tag_size;
    auto* sealed = header + header_size;
    // A whole record wanted: opened straight into the caller's memory.
    bool direct = n - got >= plain;
    auto* to = direct ? bytes_of(at + got) : sealed;
    unsigned char type = 0;
    int k = 0;
    unsigned char none[tag_size];
    bool opened =
      in_->begin(header) &&
      EVP_DecryptUpdate(in_->ctx, to, &k, sealed, as_int(plain)) == 1 &&
      EVP_DecryptUpdate(in_->ctx, &type, &k, sealed + plain, 1) == 1 &&
      EVP_CIPHER_CTX_ctrl(in_->ctx, EVP_CTRL_AEAD_SET_TAG, as_int(tag_size),
                          sealed + plain + 1) == 1 &&
      EVP_DecryptFinal_ex(in_->ctx, none, &k) == 1;
    raw_at_ += header_size + body;
    if (!opened) {
      // Nothing unproven stays in the caller's memory.
      OPENSSL_cleanse(to, plain);
      why_ = in_->sequence >= max_records
               ? "more TLS records than one key may open"
               : "a TLS record that does not open: changed on the way, or "
                 "not from this link's peer";
      break;
    }
    if (type == alert_record && plain == 2) {
      alert_ = to[1];
      why_ = alert_ == 0 ? "the peer ended the TLS session"
                         : "the peer sent TLS alert " + std::to_string(alert_);
      break;
    }
    if (type != application_data) {
      why_ = "a TLS record of a kind Lumen's peers never send (padding, a key "
             "update or a ticket)";
      break;
    }
    if (direct) {
      got += plain;
    } else {
      plain_at_ =
        static_cast<size_t>(reinterpret_cast<char*>(sealed) - raw_.data());
      plain_end_ = plain_at_ + plain;
    }
  }
  return got;
}

void tls_records::compact() {
  if (raw_.size() < receive_room + max_record)
    raw_.resize(receive_room + max_record);
  if (raw_.size() - raw_end_ >= max_record)
    return;
  bool leftover = plain_at_ < plain_end_;
  size_t keep = leftover ? plain_at_ : raw_at_;
  std::memmove(raw_.data(), raw_.data() + keep, raw_end_ - keep);
  plain_at_ = leftover ? plain_at_ - keep : 0;
  plain_end_ = leftover ? plain_end_ - keep : 0;
  raw_at_ -= keep;
  raw_end_ -= keep;
}

iovec tls_records::raw_space() {
  compact();
  return {raw_.data() + raw_end_, raw_.size() - raw_end_};
}

void tls_records::raw_came(size_t n) {
  raw_end_ += n;
}

bool tls_records::fill(int fd) {
  auto room = raw_space();
  auto k = recv_in_time(fd, room.iov_base, room.iov_len);
  if (k <= 0)
    return false;
  raw_came(static_cast<size_t>(k));
  return true;
}

bool tls_records::read(int fd, void* data, size_t n) {
  auto* at = static_cast<char*>(data);
  for (;;) {
    size_t k = take(at, n);
    at += k;
    n -= k;
    if (n == 0)
      return true;
    if (failed() || !fill(fd))
      return false;
  }
}

} // namespace lumen::detail
