#include "transport/typed_wire.hpp"

#include <cstdint>
#include <new>
#include <utility>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/serializer.hpp>

#include "lumen/caf_interop.hpp"
#include "lumen/reply_landing.hpp"

namespace lumen::detail {

namespace {

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

  /// Where each block starts, in the encoded message.
  std::vector<const char*> blocks() const {
    std::vector<const char*> out;
    for (auto& b : blocks_)
      out.push_back(b.second.data);
    return out;
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

/// The message being decoded on this thread, the frame its bytes are in
/// (view_received_bytes), and a block of it that is elsewhere.
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
caf::error decode_from(caf::actor_system& sys,
                       const std::shared_ptr<bytes>& frame, size_t offset,
                       caf::message& out, const landed_block* hole,
                       bool* hole_taken) {
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

// Set by lumen::reply_landing for the next typed request from this thread.
thread_local landing next_landing;

} // namespace

bool send_encoded(caf::actor_system& sys, const caf::message& msg,
                  size_t before, const encoded_sender& send) {
  thread_local bytes buffer;
  buffer.clear();
  gather_serializer sink{sys, buffer};
  if (sink(msg))
    return false;
  auto parts = sink.parts(before);
  send(std::move(parts), sink.first_block(), sink.blocks());
  if (buffer.capacity() > kept_buffer)
    bytes{}.swap(buffer);
  return true;
}

// A message that did not take the block (one of another size, or read
// otherwise) is decoded again from the frame put back together.
caf::error decode(caf::actor_system& sys, const std::shared_ptr<bytes>& frame,
                  size_t offset, landed_block& block, caf::message& out) {
  if (block.place.size == 0)
    return decode_from(sys, frame, offset, out, nullptr, nullptr);
  bool taken = false;
  auto err = decode_from(sys, frame, offset, out, &block, &taken);
  if (!err && taken) {
    // The message's view holds the block now; this hold goes before the
    // reply is delivered, so that a caller that lets the view go finds
    // its landing free again (a sharded server's next answer lands there).
    block.place.owner.reset();
    return err;
  }
  out = caf::message{};
  return decode_from(sys, put_back_together(*frame, block), offset, out,
                     nullptr, nullptr);
}

landing take_landing() {
  return std::exchange(next_landing, {});
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
    // The block at its caller's landing or in shared memory is not in the
    // frame: it is taken from there, where the frame's bytes would be.
    auto offset = static_cast<size_t>(at - (*loading.frame)->data());
    if (offset != hole->offset || size != hole->place.size ||
        reinterpret_cast<uintptr_t>(hole->place.at) % alignment != 0)
      return nullptr;
    loading.hole_taken = true;
    owner = hole->place.owner;
    return hole->place.at;
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
