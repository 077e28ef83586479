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
//   auto whole = std::make_shared<std::vector<char>>(total_bytes);
//   {
//     lumen::reply_landing here{whole->data() + offset, part_bytes, whole};
//     ref = lumen::call(shard, pull_atom::value); // answers a part_bytes block
//   }
//   auto [version, part] = lumen::get(ref); // part's numbers are in `whole`
//
// The landing is used when the response's first large block is exactly
// `size` bytes and its inspect views it (lumen::ml::tensor's does); any
// other response is read as usual, whole. The place must stay untouched
// until the response is in; `owner` keeps it alive until then and, for
// a view of it, after.

#include <cstddef>
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

} // namespace lumen
