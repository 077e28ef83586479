#include "transport/typed_requests.hpp"

#include <cstdint>
#include <cstring>
#include <utility>

#include <caf/actor_companion.hpp>
#include <caf/all.hpp>

#include "lumen/caf_interop.hpp"
#include "lumen/detail/runtime.hpp"

#include "trace/trace_log.hpp"
#include "transport/typed_wire.hpp"

namespace lumen::detail {

namespace {

// Senders one connection may speak for: each costs a stand-in actor, and a
// peer is not allowed to make them without end.
constexpr size_t max_senders = 4096;

thread_local int at_once_depth = 0;

/// What keeps the blocks of `msg`, being sent, while it waits for its
/// connection's writer (a copy of a message shares its contents): only
/// where the sending thread asked for sends at once.
frame_hold hold_if_at_once(const caf::message& msg,
                           std::vector<const char*> blocks) {
  if (at_once_depth == 0)
    return {};
  return {std::make_shared<const caf::message>(msg), std::move(blocks)};
}

caf::message error_message(caf::sec code, std::string what) {
  return caf::make_message(caf::make_error(code, std::move(what)));
}

/// Sends `msg` as the response to request `id`.
void respond(caf::actor_system& sys, data_connection& c, uint64_t id,
             caf::message msg) {
  auto status =
    msg.match_elements<caf::error>() ? reply_status::failed : reply_status::ok;
  const caf::message* sending = &msg;
  auto reply = [&](std::vector<byte_span> parts, size_t block_at,
                   std::vector<const char*> blocks) {
    c.send(frame_kind::reply, status, id, std::move(parts), block_at, {},
           hold_if_at_once(*sending, std::move(blocks)));
  };
  if (!send_encoded(sys, msg, 0, reply)) {
    status = reply_status::failed;
    auto why = error_message(caf::sec::runtime_error,
                             "the typed actor's response has a type this "
                             "process did not announce (LUMEN_MESSAGE_TYPE)");
    sending = &why;
    send_encoded(sys, why, 0, reply);
  }
}

caf::actor_companion* companion(const caf::strong_actor_ptr& p) {
  return static_cast<caf::actor_companion*>(
    caf::actor_cast<caf::abstract_actor*>(p));
}

} // namespace

typed_stand_ins::typed_stand_ins(caf::actor_system& sys,
                                 std::shared_ptr<data_connection> c)
  : sys_(sys)
  , conn_(std::move(c)) {}

typed_stand_ins::~typed_stand_ins() {
  for (auto& [sender, p] : by_sender_)
    companion(p)->cleanup(
      caf::make_error(caf::exit_reason::remote_link_unreachable), nullptr);
}

caf::strong_actor_ptr typed_stand_ins::stand_in(uint64_t sender) {
  auto i = by_sender_.find(sender);
  if (i != by_sender_.end())
    return i->second;
  if (by_sender_.size() >= max_senders)
    return nullptr;
  auto p = caf::actor_cast<caf::strong_actor_ptr>(
    sys_.spawn<caf::actor_companion, caf::hidden>());
  std::weak_ptr<data_connection> weak = conn_;
  companion(p)->on_enqueue([&sys = sys_, weak](caf::mailbox_element_ptr m) {
    if (!m->mid.is_response())
      return; // down messages and the like: nothing to answer
    if (auto c = weak.lock())
      respond(sys, *c, m->mid.request_id().integer_value(),
              m->move_content_to_message());
  });
  by_sender_.emplace(sender, p);
  return p;
}

void typed_stand_ins::serve(uint64_t id, std::shared_ptr<bytes> frame,
                            landed_block block) {
  // The handler runs on the actor's own time: the trace's arrow ends at
  // the message's delivery.
  trace::detail::runtime_span span{"typed", id};
  if (span.on())
    span.name.stable = &trace::detail::typed_request_name;
  const bytes& payload = *frame;
  uint64_t target = 0, sender = 0;
  constexpr size_t head = sizeof(target) + sizeof(sender);
  if (payload.size() < head)
    return respond(
      sys_, *conn_, id,
      error_message(caf::sec::runtime_error, "malformed typed request frame"));
  std::memcpy(&target, payload.data(), sizeof(target));
  std::memcpy(&sender, payload.data() + sizeof(target), sizeof(sender));
  caf::message msg;
  if (auto err = decode(sys_, frame, head, block, msg)) {
    if (err == caf::sec::no_proxy_registry) {
      conn_->send(frame_kind::reply, reply_status::unroutable, id, {});
      return;
    }
    return respond(sys_, *conn_, id,
                   error_message(caf::sec::runtime_error,
                                 "a typed request that does not decode: " +
                                   sys_.render(err)));
  }
  auto whom = sys_.registry().get(target);
  if (!whom)
    return respond(sys_, *conn_, id,
                   error_message(caf::sec::request_receiver_down,
                                 "no actor " + std::to_string(target) +
                                   " on node " + this_node()));
  auto from = stand_in(sender);
  if (!from)
    return respond(sys_, *conn_, id,
                   error_message(caf::sec::runtime_error,
                                 "too many senders on one connection"));
  auto mid = caf::make_message_id(id & caf::message_id::request_id_mask);
  whom->enqueue(
    caf::make_mailbox_element(std::move(from), mid, {}, std::move(msg)),
    nullptr);
}

bool send_typed(data_client& route, caf::actor_system& sys,
                const caf::strong_actor_ptr& target, uint64_t sender,
                const caf::message& msg, typed_done done) {
  auto to = take_landing();
  auto shared_done = std::make_shared<typed_done>(std::move(done));
  bool sent = false;
  constexpr size_t before = 2 * sizeof(uint64_t); // actor and sender
  bool encoded = send_encoded(
    sys, msg, before,
    [&](std::vector<byte_span> out, size_t block_at,
        std::vector<const char*> blocks) {
      sent = route.typed(
        target->id(), sender, out, block_at,
        [&sys, shared_done](reply_status s,
                            const std::shared_ptr<bytes>& frame) {
          caf::message reply;
          if (s == reply_status::unroutable) {
            (*shared_done)(false, reply);
            return;
          }
          if (auto err = decode(sys, frame, 0, landed(), reply))
            reply = error_message(
              caf::sec::runtime_error,
              "the typed actor's response does not load here: " +
                sys.render(err) +
                (err == caf::sec::no_proxy_registry
                   ? " (it holds an actor handle: specialize "
                     "lumen::carries_actor_handle for its type so that "
                     "lumen::call sends it through CAF)"
                   : ""));
          (*shared_done)(true, reply);
        },
        [shared_done](const std::string& why) {
          caf::message reply =
            error_message(caf::sec::request_receiver_down, why);
          (*shared_done)(true, reply);
        },
        std::move(to), hold_if_at_once(msg, std::move(blocks)));
    });
  return encoded && sent;
}

} // namespace lumen::detail

namespace lumen {

sends_at_once::sends_at_once() noexcept {
  ++detail::at_once_depth;
}

sends_at_once::~sends_at_once() {
  --detail::at_once_depth;
}

} // namespace lumen
