#pragma once

// How a typed CAF actor's message travels in a data-plane frame (kind
// `typed` and its reply, data_plane.hpp): in CAF's binary form, its large
// byte blocks written from where they lie, and read back with them viewed
// in place, in the frame, at the caller's lumen::reply_landing or in
// shared memory (view_received_bytes). typed_requests.hpp sends and serves the
// frames.

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/message.hpp>

#include "transport/data_client.hpp"

namespace lumen::detail {

/// Takes an encoded message's parts, in order, where its first large
/// block starts in the payload (0: none), and where each of its large
/// blocks starts: parts that are in the message itself, valid while it
/// is; the others are valid until the sender returns.
using encoded_sender =
  std::function<void(std::vector<byte_span> parts, size_t block_at,
                     std::vector<const char*> blocks)>;

/// Encodes `msg` to go after `before` bytes of a payload and gives it to
/// `send`; false if it does not encode (a type this process did not
/// announce).
bool send_encoded(caf::actor_system& sys, const caf::message& msg,
                  size_t before, const encoded_sender& send);

/// Decodes the padding and message at `offset` of `frame`, whose first
/// large block may be elsewhere (`block`: at a reply's landing, or in
/// shared memory). Once the message views the block, `block` lets go of
/// its hold on it.
caf::error decode(caf::actor_system& sys, const std::shared_ptr<bytes>& frame,
                  size_t offset, landed_block& block, caf::message& out);

/// The landing lumen::reply_landing set for this thread's next typed
/// request, which the thread then no longer has.
landing take_landing();

} // namespace lumen::detail
