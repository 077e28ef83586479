#include "security/gate_impl.hpp"

#include <unistd.h>

#include <array>
#include <memory>
#include <vector>

#include <boost/asio/write.hpp>
#include <openssl/bio.h>
#include <openssl/ssl.h>

#include "lumen/errors.hpp"

#include "security/gate_wire.hpp"
#include "security/token.hpp"

// A peer's way through the gate: its greeting, the token, TLS, the verdict.

namespace lumen::detail {

using boost::system::error_code;

namespace {

/// Compares every byte whatever the first difference, so that the time an
/// answer takes does not tell how much of a guess was right.
bool same_token(const std::string& shown, const std::string& token) {
  if (token.empty())
    return false;
  unsigned diff = shown.size() == token.size() ? 0 : 1;
  for (size_t i = 0; i < shown.size(); ++i)
    diff |= static_cast<unsigned>(shown[i] ^ token[i % token.size()]);
  return diff == 0;
}

std::string describe(const tcp::socket& s) {
  error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec)
    return "an unknown address";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

} // namespace

/// One peer's way through the gate; owned by the handlers waiting for it.
class gate::impl::handshake
  : public std::enable_shared_from_this<gate::impl::handshake> {
public:
  handshake(gate::impl& g, tcp::socket s)
    : g_(g)
    , sock_(std::move(s))
    , timer_(g.io)
    , peer_(describe(sock_)) {}

  void start() {
    place_ = g_.under_way.add(weak_from_this());
    timer_.expires_after(g_.limits.deadline);
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec)
        self->drop("dropped",
                   "no token within " +
                     std::to_string(self->g_.limits.deadline.count()) + " ms");
    });
    if (!g_.creds.tls)
      return read(asio::buffer(greeting_), &handshake::on_greeting);
    // Peek, so that a TLS session starts from the very first byte.
    sock_.async_receive(asio::buffer(first_), tcp::socket::message_peek,
                        [self = shared_from_this()](error_code ec, size_t) {
                          if (ec)
                            return self->lost(ec);
                          self->heard();
                          self->on_first_byte();
                        });
  }

private:
  void on_first_byte() {
    if (first_[0] != tls_handshake_byte) {
      // A plain peer: it hears why it is refused, in its own protocol.
      plain_peer_ = true;
      return read(asio::buffer(greeting_), &handshake::on_greeting);
    }
    error_code ec;
    sock_.native_non_blocking(true, ec);
    tls_ = std::make_unique<tls_handshake>(*g_.creds.tls, sock_.native_handle(),
                                           true);
    watch_tls(true);
    step_tls();
  }

  /// Takes the TLS handshake as far as the socket lets it, and again each
  /// time the socket is ready for what it waits for.
  void step_tls() {
    auto s = tls_->step();
    if (s == tls_handshake::state::failed)
      return drop(tls_->refused() ? "refused" : "dropped", tls_->why());
    if (s != tls_handshake::state::done)
      return sock_.async_wait(s == tls_handshake::state::wants_read
                                ? tcp::socket::wait_read
                                : tcp::socket::wait_write,
                              [self = shared_from_this()](error_code ec) {
                                // Dropped meanwhile: its socket number may
                                // be another's already.
                                if (self->done_)
                                  return;
                                if (ec)
                                  return self->lost(ec);
                                self->step_tls();
                              });
    try {
      records_ = tls_->records();
    } catch (const std::exception& e) {
      return drop("refused", e.what());
    }
    watch_tls(false);
    tls_.reset();
    // Keyed by the token, or by a certificate of the cluster's CA: a peer
    // that gets here holds the cluster's secret.
    reached(queue::stage::proven);
    read(asio::buffer(greeting_), &handshake::on_greeting);
  }

  void on_greeting() {
    if (!std::equal(gate_magic.begin(), gate_magic.end(), greeting_.begin()))
      return drop("dropped",
                  static_cast<unsigned char>(greeting_[0]) == tls_handshake_byte
                    ? "it speaks TLS, and this cluster runs without --tls"
                    : "not a Lumen peer (no gate greeting)");
    auto len = get_u16(greeting_.data() + gate_magic.size());
    if (len == 0 || len > max_token_size)
      return drop("dropped", "a token of " + std::to_string(len) + " bytes");
    shown_.resize(len);
    read(asio::buffer(shown_), &handshake::on_token);
  }

  void on_token() {
    verified_ = same_token(shown_, g_.creds.token) && !plain_peer_;
    if (verified_)
      reached(queue::stage::proven);
    const std::string& reason = verified_     ? std::string{}
                                : plain_peer_ ? tls_required_reason
                                              : wrong_token_reason;
    reply_.assign(3, '\0');
    reply_[0] =
      static_cast<char>(verified_ ? verdict_admitted : verdict_refused);
    put_u16(reply_.data() + 1, reason.size());
    reply_ += reason;
    write(reply_, &handshake::on_replied);
  }

  void on_replied() {
    if (done_)
      return; // dropped (deadline, close) while the reply was on its way
    if (!verified_)
      return drop("refused", plain_peer_ ? "it does not use TLS, this "
                                           "cluster does"
                                         : wrong_token_reason);
    pass();
  }

  void pass() {
    finish();
    error_code ec;
    // Small control messages go out at once, with or without TLS.
    sock_.set_option(tcp::no_delay(true), ec);
    gated_socket admitted{sock_.release(ec), std::move(records_)};
    if (admitted.fd < 0) {
      log_line("lost a " + g_.what + " connection from " + peer_ + ": " +
               ec.message());
      return;
    }
    set_blocking(admitted.fd);
    try {
      g_.admit(std::move(admitted), peer_);
    } catch (const std::exception& e) {
      // Out of memory or threads: this peer is refused, the gate goes on.
      log_line("could not serve a " + g_.what + " connection from " + peer_ +
               ": " + e.what());
    }
  }

  /// Reads all of `into` from the peer, then runs `then`. Piece by
  /// piece: each piece counts as progress (handshake_queue.hpp).
  void read(asio::mutable_buffer into, void (handshake::*then)()) {
    if (records_) {
      auto n = records_->take(static_cast<char*>(into.data()), into.size());
      if (n == into.size())
        return ((*this).*then)();
      if (records_->failed())
        return drop("dropped", records_->why());
      into += n;
    }
    auto next = [self = shared_from_this(), into, then](error_code ec,
                                                        size_t n) {
      if (ec)
        return self->lost(ec);
      self->heard();
      if (self->records_) {
        self->records_->raw_came(n);
        return self->read(into, then);
      }
      if (n < into.size())
        return self->read(into + n, then);
      ((*self).*then)();
    };
    if (!records_)
      return sock_.async_read_some(into, std::move(next));
    auto room = records_->raw_space();
    sock_.async_read_some(asio::buffer(room.iov_base, room.iov_len),
                          std::move(next));
  }

  /// Writes all of `what` to the peer, then runs `then`.
  void write(const std::string& what, void (handshake::*then)()) {
    auto next = [self = shared_from_this(), then](error_code ec, size_t) {
      if (ec)
        return self->lost(ec);
      ((*self).*then)();
    };
    if (!records_)
      return asio::async_write(sock_, asio::buffer(what), std::move(next));
    sealed_.clear();
    if (!records_->seal(what.data(), what.size(), sealed_))
      return drop("dropped", "could not seal a TLS record");
    asio::async_write(sock_, asio::buffer(sealed_), std::move(next));
  }

  void lost(const error_code& ec) {
    if (ec == asio::error::operation_aborted)
      return; // dropped already
    drop("dropped", ec == asio::error::eof ? "it left before showing a token"
                                           : ec.message());
  }

  void heard() {
    if (!done_)
      g_.under_way.heard(place_);
  }

  void reached(queue::stage s) {
    if (!done_)
      g_.under_way.advance(place_, s);
  }

  /// Has OpenSSL tell this handshake when the session reads the peer's
  /// bytes (progress, even a part of a record) and when it writes (the gate
  /// answered the peer's hello). Off once the handshake is done or dropped.
  void watch_tls(bool on) {
    BIO* bio = SSL_get_rbio(tls_->native()); // its wbio too
    BIO_set_callback_arg(bio, on ? reinterpret_cast<char*>(this) : nullptr);
    BIO_set_callback_ex(bio, on ? &on_tls_bytes : nullptr);
  }

  static long on_tls_bytes(BIO* bio, int op, const char*, size_t, int, long,
                           int ret, size_t* done) {
    auto* self = reinterpret_cast<handshake*>(BIO_get_callback_arg(bio));
    if (self == nullptr || ret <= 0 || done == nullptr || *done == 0)
      return ret;
    if (op == (BIO_CB_READ | BIO_CB_RETURN))
      self->heard();
    else if (op == (BIO_CB_WRITE | BIO_CB_RETURN))
      self->reached(queue::stage::answered);
    return ret;
  }

public:
  void drop(const char* verb, const std::string& why) {
    if (done_)
      return;
    finish();
    g_.log.say(std::string{verb} + " a " + g_.what + " connection from " +
               peer_ + ": " + why);
    error_code ec;
    sock_.close(ec);
  }

private:
  void finish() {
    if (done_)
      return;
    done_ = true;
    g_.under_way.remove(place_);
    timer_.cancel();
    if (tls_)
      watch_tls(false);
  }

  gate::impl& g_;
  tcp::socket sock_;
  std::unique_ptr<tls_handshake> tls_;   // while the TLS handshake runs
  std::unique_ptr<tls_records> records_; // after it
  std::vector<char> sealed_;
  asio::steady_timer timer_;
  std::string peer_;
  std::array<unsigned char, 1> first_{};
  std::array<char, greeting_size> greeting_{};
  std::string shown_;
  std::string reply_;
  queue::place place_;
  bool verified_ = false;
  bool plain_peer_ = false; // a peer without TLS at a gate with it
  bool done_ = false;
};

void gate::impl::start_handshake(tcp::socket s) {
  std::make_shared<handshake>(*this, std::move(s))->start();
}

void gate::impl::drop_handshake(handshake& h, const char* verdict,
                                const std::string& why) {
  h.drop(verdict, why);
}

} // namespace lumen::detail
