#pragma once

// The data plane: tasks and actor calls between processes travel as frames
// on plain TCP connections, straight from the caller's thread to the
// socket (a large typed message to another host: from the connection's
// writer thread), with one reader thread per connection publishing the
// replies.
// CAF's middleman stays the control plane (join, directory, spawn, failure
// monitoring); its per-message path is an order of magnitude slower for
// this traffic.
//
// Peers pass the gate (gate.hpp) with the cluster token first. Then a
// frame is a 24-byte header (magic, kind, status, a typed reply's block
// offset, request id, payload length) and the payload:
//   task    u32 name length, name, u32 length, the resources it waits for
//           (an encoded resource_request; length 0 for none), args
//           -> reply (ok: result, else error)
//   call    u64 actor id, u32 method length, method, args -> reply
//   typed   u64 CAF actor id, u64 sender, u8 n, n bytes of padding, a
//           CAF-serialized message -> reply (u8 n, padding, a
//           CAF-serialized response; status `unroutable` if the message
//           holds actor handles, which only CAF's middleman can load;
//           the header's block16 says where its first large block
//           starts, so that a reader may put it at the caller's
//           lumen::reply_landing).
//           The padding puts the message's first large byte block at a
//           multiple of 16 in the payload, where the receiver can read
//           it in place (lumen::view_received_bytes).
//   trace   u8 op 1 (record, and tell the clock) -> u64 clock µs, u32 pid
//           u8 op 2, i64 clock offset, u32 pid -> this process's part
//           of the trace, on the asker's clock (trace_session.hpp)
//   kill    u64 actor id -> empty (the actor is ended, as lumen::kill)
//   cancel  u64 id of a task or call frame on this connection, u8 force
//           -> empty (lumen::cancel; force ends a node running the task)
//   object  u8 op 1 (fetch), u64 object id, u64 type tag -> the value
//           u8 op 2 (give back), then u64 hold per hold ended -> empty
//           (object_exchange.hpp)
//   arena   u8 op 1, this process's shared_arena's offer (the link's
//           first frame) -> reply ok and the peer's offer (or nothing) if
//           the peer mapped it, else failed
//           u8 op 2 (this process mapped the peer's) -> empty
//           Large typed blocks then go through the arenas; see
//           kind_shared_block and kind_landing (shared_arena.hpp)
// Task and call payloads come from lumen's codec; arguments are never
// copied out of the received frame. A typed request reaches a typed CAF
// actor of the peer's process from a stand-in actor per sender
// (typed_requests.hpp), so the actor sees one sender per remote requester. This
// file is the wire; data_server.hpp and data_client.hpp are its two ends.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "lumen/detail/codec.hpp"

#include "security/gated_socket.hpp"

namespace lumen::detail {

inline constexpr uint32_t frame_magic = 0x314e4d4c; // "LMN1"

/// Nothing we send comes near this; a larger length is junk, not a frame.
inline constexpr uint64_t max_payload = uint64_t{1} << 36;

enum class frame_kind : uint8_t {
  task = 1,
  call,
  reply,
  typed,
  trace,
  object,
  kill,
  cancel,
  arena,
};

/// An `arena` frame's first byte.
inline constexpr char arena_offer = 1;
inline constexpr char arena_mapped = 2;

/// A reply's status byte.
enum class reply_status : uint8_t {
  failed = 0,
  ok = 1,
  unroutable = 2, // a typed request to send through CAF instead
};

struct frame_header {
  uint32_t magic;
  uint8_t kind;
  uint8_t status; // a reply_status, for replies
  // A typed reply: where its first large block starts in the payload, in
  // units of 16 bytes (0: none, or past 1 MiB), so that a reader can put
  // the block where its caller wants it (lumen::reply_landing).
  uint16_t block16;
  uint64_t id;
  uint64_t length;
};

/// Set in a frame's kind: the payload's first large block is in the
/// sender's shared_arena, and the payload starts with a shared_block
/// saying where (the header's length counts it, not the block).
inline constexpr uint8_t kind_shared_block = 0x80;

/// Set in a typed request's kind: the payload starts with a shared_block
/// naming the caller's landing in its arena (offset 0), where the
/// answering process may write the reply's first large block. Set in a
/// reply's: it did, and the payload starts with a shared_block saying so.
inline constexpr uint8_t kind_landing = 0x40;

struct shared_block {
  uint64_t offset; // where the block belongs in the payload
  uint64_t size;
  uint64_t where; // its offset in the arena
};

/// `size` bytes at `at`, kept alive by `owner`: where the caller of a typed
/// request wants its reply's first large block (its landing), or a block
/// that came through shared memory.
struct landing {
  char* at = nullptr;
  size_t size = 0;
  std::shared_ptr<void> owner;
};

/// A frame's block that is not in the frame: the frame holds the bytes
/// before it and after it, the block's `place.size` bytes left out from
/// `offset`.
struct landed_block {
  size_t offset = 0;
  landing place; // size 0: none
  // Written by the peer at this process's landing, whose owner the
  // reader then gives it.
  bool at_landing = false;
};

/// `frame` with `block` put back in its place.
std::shared_ptr<bytes> put_back_together(const bytes& frame,
                                         const landed_block& block);

/// What keeps a frame's large blocks alive once `send` has returned: their
/// owner (the message they are in) and where each starts. A frame with
/// them may be written later, by the connection's writer.
struct frame_hold {
  std::shared_ptr<const void> owner;
  std::vector<const char*> blocks;
};

class shared_arena;

/// One framed connection; each frame is written whole, under a lock.
class data_connection {
public:
  /// Frames from this size on, with a hold and to a peer that shares no
  /// memory with this process, are written by the connection's writer.
  static constexpr size_t written_later_from = size_t{1} << 20;

  explicit data_connection(gated_socket link);
  ~data_connection();

  data_connection(const data_connection&) = delete;
  data_connection& operator=(const data_connection&) = delete;

  /// Writes one frame whose payload is the concatenation of `parts`, its
  /// first large block at `block_at` (0: none; a typed message's, which
  /// a reader may put in place), and for a typed request, the landing
  /// its reply's block should go to; false if the peer is gone.
  /// A frame of `written_later_from` bytes or more whose blocks `hold`
  /// keeps, to a peer on another host, is queued instead (the rest of its
  /// parts copied) and written by the connection's writer thread: the
  /// caller (an actor's thread, a server answering its workers) does not
  /// wait for the link, and frames to several peers stream at once. A
  /// failed write closes the connection. Typed requests keep their order.
  bool send(frame_kind kind, reply_status status, uint64_t id,
            std::vector<byte_span> parts, size_t block_at = 0,
            const landing& to = {}, frame_hold hold = {});

  /// Reads the next frame; false on EOF, error, a malformed header or a
  /// payload above `max_length`. A block that came through shared memory
  /// is left out of the payload and viewed in `block`.
  bool receive(frame_header& header, std::shared_ptr<bytes>& payload,
               uint64_t max_length, landed_block& block);

  /// Reads the next frame's header only, and views its block as
  /// `receive`; false as `receive`. The payload follows: read all
  /// `length` bytes of it with `read`.
  bool receive_header(frame_header& header, uint64_t max_length,
                      landed_block& block);

  /// Reads the blocks the peer puts in `arena`, its own, and writes
  /// answers at the landings it names there; call on the reading thread.
  void read_shared(std::shared_ptr<shared_arena> arena);

  /// Sends large typed blocks through `arena`, this process's, and names
  /// landings in it, from now on: the peer has mapped it.
  void send_shared(std::shared_ptr<shared_arena> arena);

  /// Reads `n` bytes of the payload into `at`; false on EOF or error.
  bool read(char* at, size_t n);

  /// A buffer for a payload of `n` bytes (one kept from earlier frames
  /// when large).
  static std::shared_ptr<bytes> payload_buffer(size_t n);

  /// Wakes a reader blocked on this connection; further reads fail, and
  /// no answer is written at a landing the peer named from then on.
  void close();

private:
  struct later_frame {
    frame_kind kind;
    reply_status status;
    uint64_t id;
    size_t block_at;
    std::vector<byte_span> parts; // into `copied` and the held blocks
    bytes copied;
    frame_hold hold;
  };

  bool write_frame(frame_kind kind, reply_status status, uint64_t id,
                   const std::vector<byte_span>& parts, size_t block_at,
                   const landing& to);
  /// Queues a frame for the writer, copying the parts `hold` does not keep.
  void write_later(frame_kind kind, reply_status status, uint64_t id,
                   const std::vector<byte_span>& parts, size_t block_at,
                   frame_hold hold);
  /// Starts the writer thread if it is not running; false if it cannot.
  bool has_writer();
  void writer_loop();

  gated_socket link_;
  std::mutex write_mtx_;
  std::shared_ptr<shared_arena> reading_;
  std::shared_ptr<shared_arena> sending_; // under write_mtx_
  // Either side offered shared memory: the peer is on this host.
  std::atomic<bool> same_host_{false};
  // Frames for the writer thread, which starts with the first; a frame
  // stays at the front until written.
  std::mutex later_mtx_;
  std::condition_variable later_cv_;
  std::deque<later_frame> later_;
  bool stopping_ = false; // under later_mtx_
  std::thread writer_;
  // The landings the peer's requests named, by request id: where they
  // are in this process and in the peer's arena, and their size.
  struct named_landing {
    char* at;
    uint64_t where;
    uint64_t size;
  };
  std::mutex landings_mtx_;
  std::unordered_map<uint64_t, named_landing> landings_;
  bool closed_ = false; // under landings_mtx_: no more landings written
};

} // namespace lumen::detail
