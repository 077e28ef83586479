#include "data_plane.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "lumen/detail/arguments.hpp"
#include "lumen/errors.hpp"

#include "embedded_runtime.hpp"
#include "node_manager.hpp"
#include "protocol.hpp"
#include "socket_io.hpp"

namespace lumen::detail {

namespace {

constexpr uint32_t frame_magic = 0x314e4d4c; // "LMN1"

// Nothing we send comes near this; a larger length is junk, not a frame.
constexpr uint64_t max_payload = uint64_t{1} << 36;

// A hello carries a token: anything longer is not one, and nothing is
// allocated for a peer that has not shown it.
constexpr uint64_t max_hello = 4096;

// How long a peer may take to say hello, and a node to answer one.
constexpr auto handshake_timeout = std::chrono::seconds(5);

void set_no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// Reads a length-prefixed name at `pos` of `payload`, advancing `pos`.
bool take_name(const bytes& payload, size_t& pos, std::string& name) {
  uint32_t len = 0;
  if (payload.size() - pos < sizeof(len))
    return false;
  std::memcpy(&len, payload.data() + pos, sizeof(len));
  pos += sizeof(len);
  if (payload.size() - pos < len)
    return false;
  name.assign(payload.data() + pos, len);
  pos += len;
  return true;
}

/// A task sent by name: runs the registered invoker on the arguments inside
/// the received frame. Retries are the sender's business.
class named_task final : public task_spec {
public:
  named_task(std::shared_ptr<value_state<bytes>> st, const function_entry& e,
             std::shared_ptr<bytes> frame, byte_span args)
    : task_spec(st, e, 0, false),
      st_(std::move(st)),
      frame_(std::move(frame)),
      args_(args) {
  }

  bytes encode_args() override {
    return bytes(args_.data, args_.data + args_.size);
  }

  void accept_result(const bytes& out) override {
    st_->set_value(out);
  }

protected:
  void attempt() override {
    st_->set_value(function().invoke(function().fn, args_));
  }

private:
  std::shared_ptr<value_state<bytes>> st_;
  std::shared_ptr<bytes> frame_; // owns args_
  byte_span args_;
};

/// A call sent by name: runs the registered method invoker on the host.
class named_call final : public actor_call {
public:
  named_call(std::shared_ptr<value_state<bytes>> st, const method_entry& m,
             std::shared_ptr<bytes> frame, byte_span args)
    : actor_call(st, m),
      st_(std::move(st)),
      frame_(std::move(frame)),
      args_(args) {
  }

  void invoke(void* instance) override {
    try {
      st_->set_value(method().invoke(instance, method().key, args_));
    } catch (const actor_exit_request&) {
      throw;
    } catch (const actor_fatal_error&) {
      throw;
    } catch (...) {
      st_->set_error(capture_task_error(method().name));
    }
  }

  bytes encode_args() override {
    return bytes(args_.data, args_.data + args_.size);
  }

  void accept_result(const bytes& out) override {
    st_->set_value(out);
  }

private:
  std::shared_ptr<value_state<bytes>> st_;
  std::shared_ptr<bytes> frame_; // owns args_
  byte_span args_;
};

/// Sends `result` back as the reply to request `id` once it is ready.
void reply_when_ready(const std::shared_ptr<data_connection>& c, uint64_t id,
                      const std::shared_ptr<value_state<bytes>>& result) {
  std::weak_ptr<value_state<bytes>> weak = result;
  result->on_ready([c, id, weak] {
    auto st = weak.lock();
    if (!st)
      return;
    if (st->failed()) {
      auto err = encode_error(st->error());
      c->send(frame_kind::reply, false, id, {span_of(err)});
    } else {
      c->send(frame_kind::reply, true, id, {span_of(st->value())});
    }
  });
}

void reply_error(const std::shared_ptr<data_connection>& c, uint64_t id,
                 std::exception_ptr err) {
  auto payload = encode_error(err);
  c->send(frame_kind::reply, false, id, {span_of(payload)});
}

} // namespace

// -- data_connection ----------------------------------------------------------

data_connection::data_connection(int fd) : fd_(fd) {
  set_no_delay(fd_);
}

data_connection::~data_connection() {
  ::close(fd_);
}

bool data_connection::send(frame_kind kind, bool ok, uint64_t id,
                           std::vector<byte_span> parts) {
  frame_header h{frame_magic, static_cast<uint8_t>(kind),
                 static_cast<uint8_t>(ok ? 1 : 0), 0, id, 0};
  std::vector<iovec> iov;
  iov.push_back({&h, sizeof(h)});
  for (auto& p : parts) {
    h.length += p.size;
    if (p.size > 0)
      iov.push_back({const_cast<char*>(p.data), p.size});
  }
  std::lock_guard<std::mutex> guard{write_mtx_};
  return write_all(fd_, iov.data(), static_cast<int>(iov.size()));
}

bool data_connection::receive(frame_header& h,
                              std::shared_ptr<bytes>& payload,
                              uint64_t max_length) {
  if (!read_all(fd_, &h, sizeof(h)) || h.magic != frame_magic
      || h.length > max_length)
    return false;
  payload = std::make_shared<bytes>(h.length);
  return read_all(fd_, payload->data(), h.length);
}

void data_connection::set_timeout(std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

void data_connection::close() {
  ::shutdown(fd_, SHUT_RDWR);
}

// -- data_server --------------------------------------------------------------

data_server::data_server(embedded_runtime& rt, const std::string& host,
                         std::string token)
  : rt_(rt), token_(std::move(token)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1)
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0
      || ::listen(listen_fd_, 64) != 0
      || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len)
           != 0) {
    ::close(listen_fd_);
    throw error("cannot open a data port on " + host + ": "
                + std::strerror(errno));
  }
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread{[this] { accept_loop(); }};
}

data_server::~data_server() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> readers;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& c : conns_)
      c->close();
    readers.swap(readers_);
  }
  for (auto& r : readers)
    r.join();
}

void data_server::expose(uint64_t id, std::weak_ptr<actor_core> core) {
  std::lock_guard<std::mutex> guard{mtx_};
  actors_[id] = std::move(core);
}

void data_server::accept_loop() {
  while (!stopping_) {
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) {
      if (stopping_)
        return;
      // Out of descriptors (or a transient error): back off instead of
      // spinning; finished connections free theirs meanwhile.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    auto c = std::make_shared<data_connection>(fd);
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_)
      return;
    reap_finished();
    try {
      readers_.emplace_back([this, c] { serve(c); });
      conns_.push_back(c);
    } catch (const std::system_error&) {
      c->close(); // no thread to serve it: refuse the connection
    }
  }
}

void data_server::reap_finished() {
  for (auto id : finished_) {
    auto i = std::find_if(readers_.begin(), readers_.end(),
                          [id](auto& t) { return t.get_id() == id; });
    if (i != readers_.end()) {
      i->join(); // past its last use of the lock, which we hold
      readers_.erase(i);
    }
  }
  finished_.clear();
}

void data_server::serve(std::shared_ptr<data_connection> c) {
  try {
    frame_header h{};
    std::shared_ptr<bytes> payload;
    // Nothing is served, nor allocated beyond a small hello, before the
    // token: junk, a port scan, a silent peer or a wrong token end here.
    c->set_timeout(handshake_timeout);
    if (c->receive(h, payload, max_hello)
        && h.kind == static_cast<uint8_t>(frame_kind::hello)) {
      if (std::string(payload->begin(), payload->end()) != token_) {
        log_line("refused a data connection: wrong cluster token");
        std::string why = "wrong cluster token";
        c->send(frame_kind::refused, false, h.id, {{why.data(), why.size()}});
      } else {
        c->set_timeout(std::chrono::milliseconds{0});
        c->send(frame_kind::welcome, true, h.id, {});
        while (c->receive(h, payload, max_payload)) {
          if (h.kind == static_cast<uint8_t>(frame_kind::task))
            run_task(c, h.id, std::move(payload));
          else if (h.kind == static_cast<uint8_t>(frame_kind::call))
            run_call(c, h.id, std::move(payload));
          else
            break; // not a request: the peer is confused, drop it
        }
      }
    }
  } catch (const std::exception& e) {
    log_line(std::string{"dropped a data connection: "} + e.what());
  }
  c->close();
  std::lock_guard<std::mutex> guard{mtx_};
  conns_.erase(std::remove(conns_.begin(), conns_.end(), c), conns_.end());
  finished_.push_back(std::this_thread::get_id());
}

void data_server::run_task(const std::shared_ptr<data_connection>& c,
                           uint64_t id, std::shared_ptr<bytes> payload) {
  size_t pos = 0;
  std::string name;
  if (!take_name(*payload, pos, name))
    return reply_error(c, id, std::make_exception_ptr(codec_error(
                                "malformed task frame")));
  auto entry = find_function(name);
  if (entry == nullptr)
    return reply_error(c, id, std::make_exception_ptr(usage_error(
                                "node " + this_node() + " has no remote "
                                "function '" + name + "': start it with "
                                "--code-path to a library that registers "
                                "it with LUMEN_REMOTE")));
  auto result = std::make_shared<value_state<bytes>>();
  reply_when_ready(c, id, result);
  byte_span args{payload->data() + pos, payload->size() - pos};
  rt_.run_local(std::make_shared<named_task>(result, *entry,
                                             std::move(payload), args));
}

void data_server::run_call(const std::shared_ptr<data_connection>& c,
                           uint64_t id, std::shared_ptr<bytes> payload) {
  uint64_t actor = 0;
  size_t pos = sizeof(actor);
  std::string method;
  if (payload->size() < pos || !take_name(*payload, pos, method))
    return reply_error(c, id, std::make_exception_ptr(codec_error(
                                "malformed call frame")));
  std::memcpy(&actor, payload->data(), sizeof(actor));
  std::shared_ptr<actor_core> core;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = actors_.find(actor);
    if (i != actors_.end())
      core = i->second.lock();
  }
  if (!core)
    return reply_error(c, id, std::make_exception_ptr(actor_died(
                                "the actor is gone from node "
                                + this_node())));
  auto entry = core->cls.find(method);
  if (entry == nullptr)
    return reply_error(c, id, std::make_exception_ptr(usage_error(
                                method + " is not registered for "
                                + core->cls.name + " on node "
                                + this_node())));
  auto result = std::make_shared<value_state<bytes>>();
  reply_when_ready(c, id, result);
  byte_span args{payload->data() + pos, payload->size() - pos};
  auto call = std::make_shared<named_call>(result, *entry, std::move(payload),
                                           args);
  call->core = core;
  if (core->dead)
    return; // dropping the call replies actor_died
  call->generation = core->generation.load();
  send_call(*core, std::move(call));
}

// -- data_client --------------------------------------------------------------

data_client::data_client(const std::string& address, const std::string& token,
                         std::string peer)
  : peer_(std::move(peer)) {
  auto colon = address.rfind(':');
  auto host = address.substr(0, colon);
  auto port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0)
    throw error("cannot resolve the data address " + address + " of "
                + peer_);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  // Linux bounds connect() by the send timeout: a silent or cut-off node
  // fails the handshake instead of blocking this caller.
  timeval tv{static_cast<time_t>(handshake_timeout.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  int rc = ::connect(fd, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  if (rc != 0) {
    auto why = std::string{std::strerror(errno)};
    ::close(fd);
    throw error("cannot reach " + peer_ + " at " + address + " (" + why
                + ")");
  }
  conn_ = std::make_unique<data_connection>(fd);
  frame_header h{};
  std::shared_ptr<bytes> payload;
  if (!conn_->send(frame_kind::hello, true, 0, {{token.data(), token.size()}})
      || !conn_->receive(h, payload, max_hello))
    throw error(peer_ + " did not complete the data handshake");
  if (h.kind != static_cast<uint8_t>(frame_kind::welcome))
    throw error(peer_ + " refused this process: "
                + std::string(payload->begin(), payload->end()));
  conn_->set_timeout(std::chrono::milliseconds{0});
}

void data_client::start() {
  reader_ = std::thread{[self = shared_from_this()] { self->read_loop(); }};
}

data_client::~data_client() {
  fail_all("the runtime shut down");
  // The reader holds a reference until it ends, so this runs either after
  // it ended or on it, as its last step.
  if (reader_.joinable()) {
    if (reader_.get_id() == std::this_thread::get_id())
      reader_.detach();
    else
      reader_.join();
  }
}

void data_client::stop(const std::string& why) {
  fail_all(why);
  if (reader_.joinable() && reader_.get_id() != std::this_thread::get_id())
    reader_.join();
}

bool data_client::task(const std::string& function, const bytes& args,
                       on_reply done, on_fail fail) {
  auto len = static_cast<uint32_t>(function.size());
  return send(frame_kind::task,
       {{reinterpret_cast<const char*>(&len), sizeof(len)},
        {function.data(), function.size()},
        span_of(args)},
       std::move(done), std::move(fail));
}

bool data_client::call(uint64_t actor, const std::string& method,
                       const bytes& args, on_reply done, on_fail fail) {
  auto len = static_cast<uint32_t>(method.size());
  return send(frame_kind::call,
       {{reinterpret_cast<const char*>(&actor), sizeof(actor)},
        {reinterpret_cast<const char*>(&len), sizeof(len)},
        {method.data(), method.size()},
        span_of(args)},
       std::move(done), std::move(fail));
}

bool data_client::send(frame_kind kind, std::vector<byte_span> parts,
                       on_reply done, on_fail fail) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (closed_)
      return false;
    id = next_id_++;
    // Registered before sending: the reply may beat send() back.
    pending_.emplace(id, pending{std::move(done), std::move(fail)});
  }
  // A failed write closes the connection; the reader then fails everything
  // pending on its own thread, never inside a caller that holds locks.
  if (!conn_->send(kind, true, id, std::move(parts)))
    conn_->close();
  return true;
}

void data_client::read_loop() {
  frame_header h{};
  std::shared_ptr<bytes> payload;
  while (conn_->receive(h, payload, max_payload)) {
    pending p;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto i = pending_.find(h.id);
      if (i == pending_.end())
        continue; // failed already
      p = std::move(i->second);
      pending_.erase(i);
    }
    p.done(h.ok != 0, *payload);
  }
  fail_all("the connection to " + peer_ + " closed");
}

bool data_client::closed() {
  std::lock_guard<std::mutex> guard{mtx_};
  return closed_;
}

void data_client::fail_all(const std::string& why) {
  std::unordered_map<uint64_t, pending> doomed;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!closed_) {
      closed_ = true;
      closed_why_ = why;
    }
    doomed.swap(pending_);
  }
  conn_->close();
  for (auto& [id, p] : doomed)
    p.fail(why);
}

} // namespace lumen::detail
