#include "typed_requests.hpp"

#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#include <caf/actor_companion.hpp>
#include <caf/all.hpp>

#include "lumen/caf_interop.hpp"
#include "lumen/detail/runtime.hpp"
#include "lumen/reply_landing.hpp"

#include "trace_log.hpp"

namespace lumen::detail {

namespace {

// Senders one connection may speak for: each costs a stand-in actor, and a
// peer is not allowed to make them without end.
constexpr size_t max_senders = 4096;

/// CAF's binary encoding, except that a raw block from `in_place_from`
/// bytes on (a tensor's numbers) is not copied: the frame goes out as the
/// encoded pieces and the blocks in their places, in one gathered write.
class gather_serializer final : public caf::serializer {
public:
  static constexpr size_t in_place_from = size_t{64} << 10;

  gather_serializer(caf::actor_system& sys, bytes& buf)
    : caf::serializer(sys)
    , buf_(buf)
    , inner_(sys, buf) {}

  caf::error begin_object(uint16_t& nr, std::string& name) override {
    return inner_.begin_object(nr, name);
  }
  caf::error end_object() override {
    return inner_.end_object();
  }
  caf::error begin_sequence(size_t& n) override {
    return inner_.begin_sequence(n);
  }
  caf::error end_sequence() override {
    return inner_.end_sequence();
  }
  caf::error apply_raw(size_t n, void* data) override {
    if (n < in_place_from)
      return inner_.apply_raw(n, data);
    blocks_.push_back({buf_.size(), {static_cast<const char*>(data), n}});
    return caf::none;
  }

  /// The frame's payload after its first `before` bytes, in order: the
  /// padding, then the message. Valid while the serializer, its buffer
  /// and the encoded message are.
  std::vector<byte_span> parts(size_t before) {
    // A reader views a block in place only where it is aligned for its
    // numbers; a payload is read into a 16-aligned buffer, so the first
    // block is put at a multiple of 16 in the payload.
    size_t pad = 0;
    if (!blocks_.empty()) {
      pad = (16 - (before + 1 + blocks_.front().first) % 16) % 16;
      first_block_ = before + 1 + pad + blocks_.front().first;
    }
    pad_[0] = static_cast<char>(pad);
    std::vector<byte_span> out{{pad_, 1 + pad}};
    size_t from = 0;
    for (auto& [at, block] : blocks_) {
      out.push_back({buf_.data() + from, at - from});
      out.push_back(block);
      from = at;
    }
    out.push_back({buf_.data() + from, buf_.size() - from});
    return out;
  }

  /// Where parts() put the first block in the payload (0: no block).
  size_t first_block() const noexcept {
    return first_block_;
  }

protected:
  // Every other value goes into the buffer as CAF writes it.
#define LUMEN_FORWARD(T)                                                       \
  caf::error apply_impl(T& x) override {                                       \
    return inner_.apply(x);                                                    \
  }
  LUMEN_FORWARD(int8_t)
  LUMEN_FORWARD(uint8_t)
  LUMEN_FORWARD(int16_t)
  LUMEN_FORWARD(uint16_t)
  LUMEN_FORWARD(int32_t)
  LUMEN_FORWARD(uint32_t)
  LUMEN_FORWARD(int64_t)
  LUMEN_FORWARD(uint64_t)
  LUMEN_FORWARD(float)
  LUMEN_FORWARD(double)
  LUMEN_FORWARD(long double)
  LUMEN_FORWARD(std::string)
  LUMEN_FORWARD(std::u16string)
  LUMEN_FORWARD(std::u32string)
#undef LUMEN_FORWARD

private:
  bytes& buf_;
  caf::binary_serializer inner_;
  // Where each block goes (an offset into buf_), and the block.
  std::vector<std::pair<size_t, byte_span>> blocks_;
  char pad_[16] = {}; // the padding's length, then zeros
  size_t first_block_ = 0;
};

// The encoded pieces go out from a buffer each thread keeps; with the
// large blocks left in place it stays small, but one holding many small
// values can grow: past this size it is let go after use.
constexpr size_t kept_buffer = size_t{8} << 20;

/// Runs `send` with the parts of `msg`'s encoding (gather_serializer),
/// which go after `before` bytes of the payload, and where its first
/// large block starts in the payload (0: none); false if it does not
/// encode.
template <class F>
bool send_encoded(caf::actor_system& sys, caf::message msg, size_t before,
                  F send) {
  thread_local bytes buffer;
  buffer.clear();
  gather_serializer sink{sys, buffer};
  if (sink(msg))
    return false;
  auto parts = sink.parts(before);
  send(std::move(parts), sink.first_block());
  if (buffer.capacity() > kept_buffer)
    bytes{}.swap(buffer);
  return true;
}

/// The message being decoded on this thread, the frame its bytes are in
/// (view_received_bytes), and a block of it that landed elsewhere.
struct frame_being_loaded {
  caf::binary_deserializer* source = nullptr;
  const std::shared_ptr<bytes>* frame = nullptr;
  const landed_block* hole = nullptr;
  bool hole_taken = false;
};

thread_local frame_being_loaded loading;

/// Decodes the padding and message at `offset` of `frame`; with `hole`,
/// the frame lacks that block's bytes, which the message's inspect must
/// take in place (else `hole_taken` stays false and the message is junk).
caf::error decode(caf::actor_system& sys, const std::shared_ptr<bytes>& frame,
                  size_t offset, caf::message& out,
                  const landed_block* hole = nullptr,
                  bool* hole_taken = nullptr) {
  if (offset < frame->size())
    offset += 1 + static_cast<uint8_t>((*frame)[offset]);
  if (offset > frame->size())
    return caf::make_error(caf::sec::runtime_error,
                           "a typed message frame shorter than its padding");
  try {
    caf::binary_deserializer source{sys, frame->data() + offset,
                                    frame->size() - offset};
    // A decode never nests: an inspect runs no other message's.
    loading = {&source, &frame, hole, false};
    struct done {
      bool* taken;
      ~done() {
        if (taken != nullptr)
          *taken = loading.hole_taken;
        loading = {};
      }
    } reset{hole_taken};
    if (auto err = source(out))
      return err;
    if (source.remaining() != 0)
      return caf::make_error(caf::sec::runtime_error,
                             "trailing bytes after a typed message");
    return caf::none;
  } catch (const std::bad_alloc&) {
    return caf::make_error(caf::sec::runtime_error,
                           "a typed message claims more memory than there is");
  }
}

caf::message error_message(caf::sec code, std::string what) {
  return caf::make_message(caf::make_error(code, std::move(what)));
}

/// Sends `msg` as the response to request `id`.
void respond(caf::actor_system& sys, data_connection& c, uint64_t id,
             caf::message msg) {
  auto status =
    msg.match_elements<caf::error>() ? reply_status::failed : reply_status::ok;
  auto reply = [&](std::vector<byte_span> parts, size_t block_at) {
    // Said in the header where it fits (block_at is a multiple of 16).
    auto block16 = block_at / 16 <= UINT16_MAX ? block_at / 16 : 0;
    c.send(frame_kind::reply, status, id, std::move(parts),
           static_cast<uint16_t>(block16));
  };
  if (!send_encoded(sys, msg, 0, reply)) {
    status = reply_status::failed;
    send_encoded(sys,
                 error_message(caf::sec::runtime_error,
                               "the typed actor's response has a type this "
                               "process did not announce (LUMEN_MESSAGE_TYPE)"),
                 0, reply);
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

void typed_stand_ins::serve(uint64_t id, std::shared_ptr<bytes> frame) {
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
  if (auto err = decode(sys_, frame, head, msg)) {
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

// Set by lumen::reply_landing for the next typed request from this thread.
thread_local landing next_landing;

namespace {

/// Decodes a reply whose block may have landed at its caller's landing
/// (data_client's landed()); if the message did not take it there (a
/// block of another size, or read otherwise), decodes the whole frame
/// put back together instead.
caf::error decode_reply(caf::actor_system& sys,
                        const std::shared_ptr<bytes>& frame,
                        caf::message& out) {
  auto& hole = landed();
  if (hole.size == 0)
    return decode(sys, frame, 0, out);
  bool taken = false;
  auto err = decode(sys, frame, 0, out, &hole, &taken);
  if (!err && taken)
    return err;
  auto whole = std::make_shared<bytes>();
  whole->reserve(frame->size() + hole.size);
  whole->insert(whole->end(), frame->begin(),
                frame->begin() + static_cast<std::ptrdiff_t>(hole.at));
  whole->insert(whole->end(), hole.data, hole.data + hole.size);
  whole->insert(whole->end(),
                frame->begin() + static_cast<std::ptrdiff_t>(hole.at),
                frame->end());
  out = caf::message{};
  return decode(sys, whole, 0, out);
}

} // namespace

bool send_typed(data_client& route, caf::actor_system& sys,
                const caf::strong_actor_ptr& target, uint64_t sender,
                const caf::message& msg, typed_done done) {
  auto to = std::exchange(next_landing, {});
  auto shared_done = std::make_shared<typed_done>(std::move(done));
  bool sent = false;
  constexpr size_t before = 2 * sizeof(uint64_t); // actor and sender
  bool encoded =
    send_encoded(sys, msg, before, [&](std::vector<byte_span> out, size_t) {
      sent = route.typed(
        target->id(), sender, out,
        [&sys, shared_done](reply_status s,
                            const std::shared_ptr<bytes>& frame) {
          caf::message reply;
          if (s == reply_status::unroutable) {
            (*shared_done)(false, reply);
            return;
          }
          if (auto err = decode_reply(sys, frame, reply))
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
        std::move(to));
    });
  return encoded && sent;
}

} // namespace lumen::detail

namespace lumen {

const char* view_received_bytes(caf::deserializer& source, size_t size,
                                size_t alignment,
                                std::shared_ptr<const void>& owner) {
  using detail::loading;
  if (loading.source != &source)
    return nullptr;
  auto rest = loading.source->remainder();
  auto at = reinterpret_cast<const char*>(rest.data());
  if (auto hole = loading.hole; hole != nullptr && !loading.hole_taken) {
    // The block that landed at its caller's landing is not in the frame:
    // it is taken from there, where the frame's bytes would be.
    auto offset = static_cast<size_t>(at - (*loading.frame)->data());
    if (offset != hole->at || size != hole->size ||
        reinterpret_cast<uintptr_t>(hole->data) % alignment != 0)
      return nullptr;
    loading.hole_taken = true;
    owner = hole->owner;
    return hole->data;
  }
  if (rest.size() < size || reinterpret_cast<uintptr_t>(at) % alignment != 0)
    return nullptr;
  loading.source->skip(size);
  owner = *loading.frame;
  return at;
}

reply_landing::reply_landing(char* at, size_t size,
                             std::shared_ptr<void> owner) {
  detail::next_landing = {at, size, std::move(owner)};
}

reply_landing::~reply_landing() {
  detail::next_landing = {};
}

} // namespace lumen
