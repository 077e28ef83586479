#pragma once

// The data plane: tasks and actor calls between processes travel as frames
// on plain TCP connections, straight from the caller's thread to the
// socket, with one reader thread per connection publishing the replies.
// CAF's middleman stays the control plane (join, directory, spawn, failure
// monitoring); its per-message path is an order of magnitude slower for
// this traffic.
//
// Peers pass the gate (gate.hpp) with the cluster token first. Then a
// frame is a 24-byte header (magic, kind, ok flag, request id, payload
// length) and the payload:
//   task    u32 name length, name, args    -> reply (ok: result, else error)
//   call    u64 actor id, u32 method length, method, args -> reply
// Payload bytes come from lumen's codec; arguments are never copied out of
// the received frame.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "lumen/detail/codec.hpp"

#include "actor_host.hpp"
#include "gate.hpp"
#include "process_services.hpp"
#include "protocol.hpp"
#include "thread_set.hpp"

namespace lumen::detail {

enum class frame_kind : uint8_t {
  task = 1,
  call,
  reply,
};

struct frame_header {
  uint32_t magic;
  uint8_t kind;
  uint8_t ok;
  uint16_t reserved;
  uint64_t id;
  uint64_t length;
};

/// One framed connection; each frame is written whole, under a lock.
class data_connection {
public:
  explicit data_connection(int fd);
  ~data_connection();

  data_connection(const data_connection&) = delete;
  data_connection& operator=(const data_connection&) = delete;

  /// Writes one frame whose payload is the concatenation of `parts`;
  /// false if the peer is gone.
  bool send(frame_kind kind, bool ok, uint64_t id,
            std::vector<byte_span> parts);

  /// Reads the next frame; false on EOF, error, a malformed header or a
  /// payload above `max_length`.
  bool receive(frame_header& header, std::shared_ptr<bytes>& payload,
               uint64_t max_length);

  /// Wakes a reader blocked on this connection; further reads fail.
  void close();

private:
  int fd_;
  std::mutex write_mtx_;
};

/// The serving side, in every head and node: serves the connections its
/// gate admits, one reader thread each, running tasks on the pool and
/// handing calls to actor hosts.
class data_server {
public:
  /// Listens on `host`, any free port; throws `error` if it cannot.
  data_server(process_services& rt, const std::string& host,
              const credentials& creds);
  ~data_server();

  uint16_t port() const noexcept;

  /// Makes an actor hosted here callable under `id`.
  void expose(uint64_t id, std::weak_ptr<actor_core> core);

private:
  void admit(int fd);
  void serve(std::shared_ptr<data_connection> c);
  void run_task(const std::shared_ptr<data_connection>& c, uint64_t id,
                std::shared_ptr<bytes> payload);
  void run_call(const std::shared_ptr<data_connection>& c, uint64_t id,
                std::shared_ptr<bytes> payload);

  process_services& rt_;
  std::unique_ptr<gate> gate_;
  std::mutex mtx_;
  std::vector<std::shared_ptr<data_connection>> conns_;
  thread_set readers_; // one per connection, joined once it ended
  std::unordered_map<uint64_t, std::weak_ptr<actor_core>> actors_;
};

/// A driver's connection to one node. Its reader thread keeps it alive
/// until the connection ends; `stop` ends both.
class data_client : public std::enable_shared_from_this<data_client> {
public:
  using on_reply = std::function<void(bool ok, const bytes& payload)>;
  using on_fail = std::function<void(const std::string& why)>;

  /// Connects and presents the credentials; throws `error` saying what failed.
  data_client(const std::string& address, const credentials& creds,
              std::string peer);
  ~data_client();

  data_client(const data_client&) = delete;
  data_client& operator=(const data_client&) = delete;

  /// Sends a task; exactly one of the callbacks runs later, on the reader
  /// thread. Returns false, running neither, if the connection is gone.
  bool task(const std::string& function, const bytes& args, on_reply done,
            on_fail fail);

  /// Sends a call to actor `actor` on the peer; as `task` otherwise.
  bool call(uint64_t actor, const std::string& method, const bytes& args,
            on_reply done, on_fail fail);

  /// Starts the reader thread; call once, right after construction.
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
    on_reply done;
    on_fail fail;
  };

  bool send(frame_kind kind, std::vector<byte_span> parts, on_reply done,
            on_fail fail);
  void read_loop();

  std::string peer_;
  std::unique_ptr<data_connection> conn_;
  std::mutex mtx_;
  bool closed_ = false;
  std::string closed_why_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, pending> pending_;
  std::thread reader_;
};

/// A reply callback that publishes into the result of `x` (a task or a
/// call): the value, the remote error, or the error of decoding it.
template <class T>
data_client::on_reply publish_reply(std::shared_ptr<T> x) {
  return [x](bool ok, const bytes& out) {
    if (!ok) {
      x->result()->set_error(decode_error(out));
      return;
    }
    try {
      x->accept_result(out);
    } catch (...) {
      x->result()->set_error(std::current_exception());
    }
  };
}

} // namespace lumen::detail
