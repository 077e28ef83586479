#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <caf/actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/system_messages.hpp>

#include "lumen/errors.hpp"

#include "core/process_services.hpp"
#include "security/credentials.hpp"
#include "transport/address.hpp"

namespace lumen::detail {

/// How long a request to the head may take: it answers at once, and one
/// that takes longer is as good as gone for a caller that must fail
/// within 2 s.
inline constexpr auto head_timeout = std::chrono::seconds(2);

/// This process's link to the head: its control handle, a probe every
/// 500 ms (does the head answer, and does it count this node alive?), and,
/// once the head is lost, attempts every 500 ms to reach a head at the
/// same address again. What needs the head asks for it here, and fails at once
/// with `errc::head_unreachable` while it is lost.
class head_link {
public:
  /// Connects to the head at `where` and says hello as `role`; throws
  /// `error` saying what failed.
  head_link(process_services& rt, const address& where, credentials creds,
            std::string role);

  /// Stops watching.
  ~head_link();

  /// The id the head gave this process.
  const std::string& id() const noexcept {
    return id_;
  }

  /// The head; throws `errc::head_unreachable` while it is lost.
  caf::actor get();

  /// The error for what needs the head while it cannot be reached.
  error unreachable(const std::string& why) const;

  /// Sends the head the request `xs` and hands its answer to `on_answer`;
  /// throws `errc::head_unreachable` if it is lost or does not answer
  /// within `head_timeout`.
  template <class F, class... Ts>
  void ask(F on_answer, Ts&&... xs) {
    auto head = get();
    caf::scoped_actor self{rt_.system()};
    self->request(head, head_timeout, std::forward<Ts>(xs)...)
      .receive(on_answer, [&](caf::error& err) {
        throw unreachable(rt_.system().render(err));
      });
  }

  /// `ask` for a request the head answers with (found, value).
  template <class... Ts>
  std::optional<std::string> ask_for_string(Ts&&... xs) {
    std::optional<std::string> found;
    ask(
      [&](bool ok, std::string& value) {
        if (ok)
          found = std::move(value);
      },
      std::forward<Ts>(xs)...);
    return found;
  }

  /// Starts watching the head; once it is back after a loss, runs
  /// `on_back` (a node joins it there) before saying hello again.
  void watch(std::function<void(const caf::actor& head)> on_back);

  /// On the requester's thread: whether `msg` is the head's death, which
  /// it then takes note of.
  bool on_down(const caf::down_msg& msg);

  /// True while the head is lost.
  bool lost();

  /// Stops the rejoin attempts; call before the runtime goes away.
  void stop();

private:
  void rejoin_loop();
  /// Asks the head whether it counts this process alive; the reason it is
  /// lost, or empty.
  std::string probe(const caf::actor& head);
  /// One attempt to reach a head at the address again; null if none.
  caf::actor try_rejoin();

  process_services& rt_;
  address where_;
  credentials creds_;
  std::string role_;
  std::string id_;
  std::mutex mtx_;
  caf::actor head_;   // under mtx_
  bool lost_ = false; // under mtx_
  std::atomic<bool> stopping_{false};
  std::condition_variable cv_;
  std::function<void(const caf::actor&)> on_back_;
  int failed_attempts_ = 0; // rejoiner thread only
  std::thread rejoiner_;
};

} // namespace lumen::detail
