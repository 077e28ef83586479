#pragma once

// Channels: a byte stream between two processes of a cluster, on a TCP
// connection of its own, for traffic too heavy or too chatty for actor
// calls (a ring all-reduce moves hundreds of megabytes a second between
// neighbours). One side listens under a name, the other connects to the
// name; the head's directory tells where the name lives, so neither needs
// to know the other's address.
//
//   auto l = lumen::listen("shard-3");              // in one process
//   lumen::channel c = l.accept(5s);
//   c.recv(buf.data(), buf.size());
//
//   auto c = lumen::connect("shard-3", 5s);         // in another
//   c.send(buf.data(), buf.size());
//
// A connection passes the listening process's gate like every other link
// of the cluster: it shows the cluster token, over TLS when the cluster
// uses it. A name is the cluster's: a second listener under it anywhere
// is refused, and the name is free again once its listener is destroyed
// or its process died. Outside a cluster, names and channels stay inside
// the process (over loopback, for code that runs either way).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "lumen/errors.hpp"

struct iovec;

namespace lumen {

/// A channel failed: the peer closed it or its process died
/// (`errc::channel_closed`), nothing came within the timeout
/// (`errc::timeout`), nobody listens under the name (`errc::unreachable`).
/// The message names the channel.
class channel_error : public error {
public:
  using error::error;
};

/// One end of a channel. Sending and receiving may run on two threads at
/// once (the stream is full duplex); two threads must not both send, or
/// both receive.
class channel {
public:
  channel() = default;
  ~channel();
  channel(channel&& other) noexcept;
  channel& operator=(channel&& other) noexcept;

  /// Writes all `n` bytes; throws `channel_error` once the peer is gone.
  void send(const void* data, size_t n);

  /// Writes the buffers of `parts` in one go, as `send` otherwise.
  void send(iovec* parts, int count);

  /// Writes what the socket takes without waiting, from the buffers of
  /// `parts` in order; returns how many bytes (0 if it is full). Throws
  /// `channel_error` once the peer is gone.
  size_t send_some(const iovec* parts, int count);

  /// Reads exactly `n` bytes; throws `channel_error` if the peer closed
  /// the channel first or nothing came within the timeout.
  void recv(void* data, size_t n);

  /// Reads what has arrived, at least one byte and at most `n`; returns
  /// how many. Throws as `recv` does.
  size_t recv_some(void* data, size_t n);

  /// How long `send` and `recv` wait for the peer before they fail
  /// (default and 0: forever). A dead peer's process fails them at once,
  /// and a peer whose machine acknowledged nothing for 1.5 s (a cut link,
  /// a lost host) within about 2 s, on TCP channels; on a cluster with
  /// TLS, that is left to the timeout. Throws `usage_error` for a
  /// negative one.
  void set_timeout(std::chrono::milliseconds timeout);

  /// Ends this end's sending: the peer reads what was sent, then the end
  /// of the stream; receiving goes on.
  void shutdown_send() noexcept;

  /// Ends the channel both ways: the peer's calls fail, and so do this
  /// end's, also ones blocked on other threads.
  void shutdown() noexcept;

  /// The name the channel was opened under.
  const std::string& name() const noexcept {
    return name_;
  }

  explicit operator bool() const noexcept {
    return fd_ >= 0;
  }

  /// The channel's socket, for polling; stays owned by the channel.
  int native_handle() const noexcept {
    return fd_;
  }

  /// For the runtime: takes ownership of `fd`.
  channel(int fd, std::string name) noexcept;

private:
  [[noreturn]] void fail(const char* doing) const;

  int fd_ = -1;
  std::string name_;
};

/// Takes the channels opened to a name; the name is given up when the
/// listener is destroyed.
class channel_listener {
public:
  channel_listener() = default;
  ~channel_listener();
  channel_listener(channel_listener&&) noexcept = default;
  channel_listener& operator=(channel_listener&&) noexcept;

  /// The next channel opened to this name; throws `channel_error`
  /// (`errc::timeout`) if none came within `timeout`.
  channel accept(std::chrono::milliseconds timeout);

  const std::string& name() const noexcept {
    return name_;
  }

  struct queue;
  /// For the runtime.
  channel_listener(std::string name, std::shared_ptr<queue> q) noexcept;

private:
  void release() noexcept;

  std::string name_;
  std::shared_ptr<queue> queue_;
};

/// Listens under `name` (any text of 1 to 200 bytes). Throws `usage_error`
/// with `errc::name_taken` if a listener anywhere in the cluster has it,
/// or if Lumen is not running.
channel_listener listen(const std::string& name);

/// Opens a channel to the listener of `name`, waiting up to `timeout` for
/// the name to appear; throws `channel_error` (`errc::unreachable`) if it
/// did not, or `error` with the code of a refused link (`wrong_token`,
/// `tls_mismatch`).
channel connect(const std::string& name, std::chrono::milliseconds timeout);

} // namespace lumen
