#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "security/credentials.hpp"
#include "transport/data_plane.hpp"
#include "transport/protocol.hpp"

namespace lumen::detail {

/// The landed block of the reply whose callback runs on this thread now.
landed_block& landed();

/// A driver's connection to one node. Its reader thread keeps it alive
/// until the connection ends; `stop` ends both.
class data_client : public std::enable_shared_from_this<data_client> {
public:
  using on_reply = std::function<void(bool ok, const bytes& payload)>;
  /// A reply's status and its frame (which a decoder may keep, to read
  /// large blocks in place).
  using on_status =
    std::function<void(reply_status, const std::shared_ptr<bytes>& frame)>;
  using on_fail = std::function<void(const std::string& why)>;

  /// Connects and presents the credentials; throws `error` saying what failed.
  data_client(const std::string& address, const credentials& creds,
              std::string peer);
  ~data_client();

  data_client(const data_client&) = delete;
  data_client& operator=(const data_client&) = delete;

  /// Sends a task, which waits on the peer for `resources` (encoded
  /// resource_request; empty for none); exactly one of the callbacks runs
  /// later, on the reader thread. Returns the request's id (for `cancel`),
  /// or 0, running neither callback, if the connection is gone.
  uint64_t task(const std::string& function, const bytes& resources,
                const bytes& args, on_reply done, on_fail fail);

  /// Sends a call to actor `actor` on the peer; as `task` otherwise.
  uint64_t call(uint64_t actor, const std::string& method, const bytes& args,
                on_reply done, on_fail fail);

  /// Passes lumen::cancel on to the task or call sent as `request`; its
  /// own reply says how it ended.
  void cancel(uint64_t request, bool force);

  /// Sends `message`, a CAF-serialized message in pieces whose first
  /// large block starts at `block_at` of the payload (0: none), to the
  /// typed CAF actor `actor` of the peer's process on behalf of `sender`
  /// (an actor id of this process, or 0); as `task` otherwise. `hold`
  /// keeps the message's blocks, so that a large one may be written after
  /// this returns (data_connection::send).
  bool typed(uint64_t actor, uint64_t sender,
             const std::vector<byte_span>& message, size_t block_at,
             on_status done, on_fail fail, landing to = {},
             frame_hold hold = {});

  /// Sends a trace request (see data_plane.hpp); as `typed` otherwise.
  bool trace(const bytes& request, on_status done, on_fail fail);

  /// Ends actor `actor` of the peer's process, as lumen::kill; as `typed`
  /// otherwise.
  bool kill(uint64_t actor, on_status done, on_fail fail);

  /// Sends an object request (see data_plane.hpp); as `typed` otherwise.
  bool object(const bytes& request, on_status done, on_fail fail);

  /// Starts the reader thread and agrees with the peer on shared memory
  /// (offer_arena); call once, right after construction.
  void start();

  /// Fails everything pending with `why` and closes the connection.
  void fail_all(const std::string& why);

  /// Fails everything pending and waits for the reader thread to end, so
  /// that no callback runs afterwards (unless called on that thread).
  void stop(const std::string& why);

  /// True once the connection is gone; everything sent then fails.
  bool closed();

private:
  struct pending {
    on_status done;
    on_fail fail;
    landing to;         // a typed request's: where its reply's block goes
    bool typed = false; // its reply's decoder takes a block not in the frame
  };

  /// Reads the payload of a frame with header `h` into a buffer, and the
  /// reply's first large block to `to` if the frame says where it is;
  /// `block` is a block that came through shared memory, or comes back
  /// as the one that landed.
  bool read_payload(const frame_header& h, const landing& to,
                    std::shared_ptr<bytes>& payload, landed_block& block);

  /// Offers the peer this process's shared_arena, if it has one, and
  /// maps the peer's if it answers with one (shared_arena.hpp).
  void offer_arena();

  /// `what`, a registered name, names a task or call in a trace, whose
  /// arrow starts here.
  /// Returns the request's id, or 0 if the connection is gone.
  uint64_t send(frame_kind kind, std::vector<byte_span> parts, on_status done,
                on_fail fail, const std::string* what = nullptr,
                landing to = {}, size_t block_at = 0, frame_hold hold = {});
  void read_loop();

  std::string peer_;
  std::unique_ptr<data_connection> conn_;
  std::mutex mtx_;
  bool closed_ = false;
  std::string closed_why_;
  std::unordered_map<uint64_t, pending> pending_;
  std::thread reader_;
};

/// Passes a cancel on to request `id` of `data`, for
/// cancellable::forward_cancel; does nothing once the connection is gone.
std::function<void(bool force)>
cancel_on(const std::shared_ptr<data_client>& data, uint64_t id);

/// A reply callback that publishes into the result of `x` (a task or a
/// call): the value, the remote error, or the error of decoding it.
template <class T>
data_client::on_reply publish_reply(std::shared_ptr<T> x) {
  return [x](bool ok, const bytes& out) { publish_answer(*x, ok, out); };
}

} // namespace lumen::detail
