#pragma once

// Where the answer of a typed actor in another process should land. A
// response's large byte block (a tensor's numbers, 64 KiB or more) is
// read off the socket into a buffer of the receiving side's, then viewed
// in place (lumen::view_received_bytes). A caller that wants the block in
// a place of its own, one part of a larger buffer, say, names that place
// for its next request: the block is read from the socket straight into
// it, and the response views it there. A sharded parameter server's
// client joins its shards' answers so, without copying them.
//
//   auto whole = lumen::landing_buffer(total_bytes);
//   {
//     lumen::reply_landing here{whole.get() + offset, part_bytes, whole};
//     ref = lumen::call(shard, pull_atom::value); // answers a part_bytes block
//   }
//   auto [version, part] = lumen::get(ref); // part's numbers are in `whole`
//
// The landing is used when the response's first large block is exactly
// `size` bytes and its inspect views it (lumen::ml::tensor's does); any
// other response is read as usual, whole. The place must stay untouched
// until the response is in; `owner` keeps it alive until then and, for
// a view of it, after.
//
// A landing in memory from lumen::landing_buffer is better still when the
// answering process is on the same host: it writes its answer there
// itself, through shared memory, and the caller copies nothing at all.

#include <cstddef>
#include <cstdint>
#include <memory>

namespace lumen {

/// While it lives, the next typed request this thread sends to another
/// process (lumen::call, lumen::request) has its response's first large
/// block read into `[at, at + size)`.
class reply_landing {
public:
  reply_landing(char* at, size_t size, std::shared_ptr<void> owner);
  ~reply_landing();

  reply_landing(const reply_landing&) = delete;
  reply_landing& operator=(const reply_landing&) = delete;
};

/// `size` bytes, 64-aligned, for landings: in this process's shared
/// memory, which an answering process on the same host writes to
/// directly (from the heap where there is none, or for less than 256
/// KiB). Held until the pointer and its copies end.
std::shared_ptr<char> landing_buffer(size_t size);

/// This process's traffic through shared memory since it started.
struct shared_memory_counts {
  /// Large blocks (a typed message's, of 256 KiB or more) it sent to
  /// processes on its host through shared memory, and their bytes:
  /// written into its own arena, or at the landing a caller named.
  uint64_t blocks_sent = 0;
  uint64_t bytes_sent = 0;
  /// Answers a process on its host wrote at its landings.
  uint64_t answers_landed = 0;
};

/// The counts so far. Shared memory links processes of one host and one
/// network namespace; LUMEN_SHARED_MEMORY=0 keeps every byte on the
/// sockets.
shared_memory_counts shared_memory_counts_now();

} // namespace lumen
