#include "transport/data_client.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <utility>

#include "objects/shared_arena.hpp"
#include "security/gate.hpp"
#include "trace/trace_log.hpp"
#include "transport/address.hpp"

namespace lumen::detail {

namespace {

// How long a node may take to let this process in.
constexpr auto handshake_timeout = std::chrono::milliseconds(5000);

} // namespace

data_client::data_client(const std::string& address, const credentials& creds,
                         std::string peer)
  : peer_(std::move(peer)) {
  conn_ = std::make_unique<data_connection>(
    pass_gate(parse_address(address), creds, peer_, handshake_timeout));
}

void data_client::start() {
  reader_ = std::thread{[self = shared_from_this()] { self->read_loop(); }};
  offer_arena();
}

// Waits for the answer (a round trip, once per link), so that the link's
// first requests take the same path as the next ones; blocks stay on the
// socket if the peer does not answer in time.
void data_client::offer_arena() {
  auto own = shared_arena::own();
  if (!own)
    return;
  auto answered = std::make_shared<std::promise<void>>();
  auto mapped = [weak = weak_from_this(), own, answered](
                  reply_status s, const std::shared_ptr<bytes>& theirs) {
    auto self = weak.lock();
    if (self && s == reply_status::ok) {
      self->conn_->send_shared(own);
      if (auto peer = shared_arena::peer(*theirs)) {
        self->conn_->read_shared(std::move(peer));
        char op = arena_mapped;
        self->send(
          frame_kind::arena, {{&op, 1}},
          [](reply_status, const std::shared_ptr<bytes>&) {},
          [](const std::string&) {});
      }
    }
    answered->set_value();
  };
  char op = arena_offer;
  if (send(frame_kind::arena, {{&op, 1}, span_of(own->offer())},
           std::move(mapped),
           [answered](const std::string&) { answered->set_value(); }) != 0)
    answered->get_future().wait_for(handshake_timeout);
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

namespace {

data_client::on_status with_ok(data_client::on_reply done) {
  return [done = std::move(done)](reply_status s,
                                  const std::shared_ptr<bytes>& frame) {
    done(s == reply_status::ok, *frame);
  };
}

} // namespace

uint64_t data_client::task(const std::string& function, const bytes& resources,
                           const bytes& args, on_reply done, on_fail fail) {
  auto len = static_cast<uint32_t>(function.size());
  auto resources_len = static_cast<uint32_t>(resources.size());
  return send(
    frame_kind::task,
    {{reinterpret_cast<const char*>(&len), sizeof(len)},
     {function.data(), function.size()},
     {reinterpret_cast<const char*>(&resources_len), sizeof(resources_len)},
     span_of(resources),
     span_of(args)},
    with_ok(std::move(done)), std::move(fail), &function);
}

uint64_t data_client::call(uint64_t actor, const std::string& method,
                           const bytes& args, on_reply done, on_fail fail) {
  auto len = static_cast<uint32_t>(method.size());
  return send(frame_kind::call,
              {{reinterpret_cast<const char*>(&actor), sizeof(actor)},
               {reinterpret_cast<const char*>(&len), sizeof(len)},
               {method.data(), method.size()},
               span_of(args)},
              with_ok(std::move(done)), std::move(fail), &method);
}

void data_client::cancel(uint64_t request, bool force) {
  uint8_t forced = force ? 1 : 0;
  send(
    frame_kind::cancel,
    {{reinterpret_cast<const char*>(&request), sizeof(request)},
     {reinterpret_cast<const char*>(&forced), sizeof(forced)}},
    [](reply_status, const std::shared_ptr<bytes>&) {},
    [](const std::string&) {});
}

std::function<void(bool force)>
cancel_on(const std::shared_ptr<data_client>& data, uint64_t id) {
  return [weak = std::weak_ptr<data_client>{data}, id](bool force) {
    if (auto d = weak.lock())
      d->cancel(id, force);
  };
}

bool data_client::typed(uint64_t actor, uint64_t sender,
                        const std::vector<byte_span>& message, size_t block_at,
                        on_status done, on_fail fail, landing to,
                        frame_hold hold) {
  std::vector<byte_span> parts{
    {reinterpret_cast<const char*>(&actor), sizeof(actor)},
    {reinterpret_cast<const char*>(&sender), sizeof(sender)}};
  parts.insert(parts.end(), message.begin(), message.end());
  return send(frame_kind::typed, std::move(parts), std::move(done),
              std::move(fail), &trace::detail::typed_request_name,
              std::move(to), block_at, std::move(hold));
}

bool data_client::trace(const bytes& request, on_status done, on_fail fail) {
  return send(frame_kind::trace, {span_of(request)}, std::move(done),
              std::move(fail));
}

bool data_client::kill(uint64_t actor, on_status done, on_fail fail) {
  return send(frame_kind::kill,
              {{reinterpret_cast<const char*>(&actor), sizeof(actor)}},
              std::move(done), std::move(fail));
}

bool data_client::object(const bytes& request, on_status done, on_fail fail) {
  return send(frame_kind::object, {span_of(request)}, std::move(done),
              std::move(fail));
}

uint64_t data_client::send(frame_kind kind, std::vector<byte_span> parts,
                           on_status done, on_fail fail,
                           const std::string* what, landing to, size_t block_at,
                           frame_hold hold) {
  // A request's id is also its arrow's id in a trace, where the arrows of
  // every process of the cluster meet: so not a count from 1.
  auto id = trace::detail::new_flow();
  trace::detail::runtime_span span{"submit"};
  if (span.on() && what != nullptr)
    span.submits(*what, id);
  else
    span.drop();
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (closed_) {
      span.drop();
      return 0;
    }
    // Registered before sending: the reply may beat send() back.
    pending_.emplace(id, pending{std::move(done), std::move(fail), to,
                                 kind == frame_kind::typed});
  }
  // A failed write closes the connection; the reader then fails everything
  // pending on its own thread, never inside a caller that holds locks.
  if (!conn_->send(kind, reply_status::ok, id, std::move(parts), block_at, to,
                   std::move(hold)))
    conn_->close();
  return id;
}

namespace {

// The block landed for the reply whose callback runs on this thread.
thread_local landed_block landed_now;

} // namespace

landed_block& landed() {
  return landed_now;
}

bool data_client::read_payload(const frame_header& h, const landing& to,
                               std::shared_ptr<bytes>& payload,
                               landed_block& block) {
  if (block.at_landing) { // the peer wrote it there
    if (to.at != block.place.at || to.size != block.place.size)
      return false;
    block.place = to;
    shared_memory_counted().answers_landed.fetch_add(1,
                                                     std::memory_order_relaxed);
  } else if (block.place.size != 0 && to.size == block.place.size) {
    std::memcpy(to.at, block.place.at, to.size); // from the peer's arena
    block.place = to;
  }
  // Whole, unless its block is to be read off the socket to the landing.
  size_t at = size_t{h.block16} * 16;
  if (block.place.size != 0 || to.size == 0 ||
      h.kind != static_cast<uint8_t>(frame_kind::reply) || at == 0 ||
      at >= h.length) {
    payload = data_connection::payload_buffer(h.length);
    return conn_->read(payload->data(), h.length);
  }
  // The block's bytes go to the landing; the frame keeps the rest. A block
  // of another size than the landing's is found out by the decoder.
  size_t n = std::min<uint64_t>(to.size, h.length - at);
  payload = data_connection::payload_buffer(h.length - n);
  block = {at, {to.at, n, to.owner}};
  return conn_->read(payload->data(), at) && conn_->read(to.at, n) &&
         conn_->read(payload->data() + at, h.length - at - n);
}

void data_client::read_loop() {
  frame_header h{};
  landed_block block;
  while (conn_->receive_header(h, max_payload, block)) {
    landing to;
    if (h.block16 != 0 || block.place.size != 0) { // a block to its landing
      std::lock_guard<std::mutex> guard{mtx_};
      auto i = pending_.find(h.id);
      if (i != pending_.end())
        to = i->second.to;
    }
    std::shared_ptr<bytes> payload;
    if (!read_payload(h, to, payload, block))
      break;
    pending p;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto i = pending_.find(h.id);
      if (i == pending_.end())
        continue; // failed already
      p = std::move(i->second);
      pending_.erase(i);
    }
    if (block.place.size != 0 && !p.typed) // only a typed reply has one
      payload = put_back_together(*payload, std::exchange(block, {}));
    // The landing is read: only the block's own hold on it goes on into
    // the reply (and that one is let go once the reply views it).
    to = {};
    p.to = {};
    landed_now = std::move(block);
    p.done(static_cast<reply_status>(h.status), payload);
    landed_now = {};
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
  for (auto& [id, p] : doomed) {
    // The peer may be writing at the landing still, until it sees the
    // link closed: the place is not handed out again before then.
    if (p.to.owner)
      shared_arena::keep_a_while(std::move(p.to.owner));
    p.fail(why);
  }
}

} // namespace lumen::detail
