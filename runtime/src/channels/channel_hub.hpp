#pragma once

// The serving side of channels (lumen/channel.hpp) in one process: a gate
// of its own, made on the first `listen`, that admits peers with the
// cluster token and hands each admitted socket to the listener it names.
//
//   peer -> hub   u16 name length (1..200), the name
//   hub -> peer   u8 verdict (0 taken, 1 nobody listens here under it)
//
// Integers are little-endian. A peer that does not name a listener within
// the gate's deadline is dropped.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "lumen/channel.hpp"

#include "core/thread_set.hpp"
#include "security/credentials.hpp"
#include "security/gate.hpp"

namespace lumen {

/// The sockets opened to one listener, waiting for `accept`.
struct channel_listener::queue {
  std::mutex mtx;
  std::condition_variable cv;
  std::deque<int> fds;
  bool closed = false;

  /// Closes what nobody accepted.
  ~queue();
};

} // namespace lumen

namespace lumen::detail {

inline constexpr size_t max_channel_name = 200;
inline constexpr uint8_t channel_taken = 0;
inline constexpr uint8_t channel_unknown = 1;

/// Throws `usage_error` unless `name` is 1 to max_channel_name bytes.
void check_channel_name(const std::string& name);

class channel_hub {
public:
  /// Listens on `host`, any free port; throws `error` if it cannot.
  channel_hub(const std::string& host, credentials creds);
  ~channel_hub();

  channel_hub(const channel_hub&) = delete;
  channel_hub& operator=(const channel_hub&) = delete;

  /// HOST:PORT, for the directory.
  std::string address() const;

  /// Starts queuing what is opened to `name`; throws `usage_error`
  /// (`errc::name_taken`) if a listener here has it.
  std::shared_ptr<channel_listener::queue> open(const std::string& name);

  /// Whether a listener here has `name`.
  bool listening(const std::string& name);

  /// Stops queuing for `name` and closes what waits there.
  void close(const std::string& name);

private:
  void admit(int fd);

  std::string host_;
  std::unique_ptr<gate> gate_;
  std::mutex mtx_;
  std::map<std::string, std::shared_ptr<channel_listener::queue>> queues_;
  thread_set greeters_; // each reads one peer's name
  bool stopping_ = false;
};

/// Opens a channel to the hub at `where`, naming `name`; throws `error`
/// (the gate's codes), or `channel_error` with `errc::unreachable` if no
/// listener there has the name.
channel open_channel(const std::string& where, const std::string& name,
                     const credentials& creds,
                     std::chrono::milliseconds timeout);

} // namespace lumen::detail
