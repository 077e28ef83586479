#pragma once

// Typed CAF actors' requests on the data plane (data_plane.hpp, frame kind
// `typed`): the message goes in CAF's binary form, as CAF's middleman would
// send it, but straight from the caller's thread to the socket (a large one
// sent under lumen::sends_at_once: from the connection's writer thread) and
// back from the peer's reader thread, without the middleman's per-message
// cost (typed_wire.hpp: how the message is encoded and decoded in the frame).

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/message.hpp>

#include "lumen/detail/caf_request.hpp"

#include "transport/data_client.hpp"
#include "transport/data_plane.hpp"

namespace lumen::detail {

/// The serving end, one per connection: hands each typed request to its
/// actor from a stand-in actor for its sender and sends the response back
/// on the connection. The stand-ins end with the connection, so that an
/// actor monitoring a requester (a parameter server waiting for a
/// worker's gradient) hears when its process is gone.
class typed_stand_ins {
public:
  typed_stand_ins(caf::actor_system& sys, std::shared_ptr<data_connection> c);
  ~typed_stand_ins();

  typed_stand_ins(const typed_stand_ins&) = delete;
  typed_stand_ins& operator=(const typed_stand_ins&) = delete;

  /// Serves request `id`, a `typed` frame's payload, whose first large
  /// block may have come through shared memory.
  void serve(uint64_t id, std::shared_ptr<bytes> payload, landed_block block);

private:
  /// The stand-in of `sender`, made on first use; null past the limit.
  caf::strong_actor_ptr stand_in(uint64_t sender);

  caf::actor_system& sys_;
  std::shared_ptr<data_connection> conn_;
  std::unordered_map<uint64_t, caf::strong_actor_ptr> by_sender_;
};

/// The requesting end: sends `msg` to `target` through `route`, the data
/// connection of `target`'s process; false if `msg` does not serialize
/// (a type no one announced), leaving it to CAF to say so.
bool send_typed(data_client& route, caf::actor_system& sys,
                const caf::strong_actor_ptr& target, uint64_t sender,
                const caf::message& msg, typed_done done);

} // namespace lumen::detail
