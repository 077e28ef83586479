#include "cluster/head_link.hpp"

#include <caf/all.hpp>

#include "core/log.hpp"
#include "transport/control_link.hpp"
#include "transport/protocol.hpp"
#include "transport/pulse.hpp"

namespace lumen::detail {

namespace {

constexpr auto rejoin_interval = std::chrono::milliseconds(500);

// The head answers a probe at once; CAF's monitors alone missed a node that
// was given up for dead while paused, and a head that went silent.
constexpr auto probe_interval = std::chrono::milliseconds(500);
constexpr auto probe_timeout = std::chrono::milliseconds(1500);

} // namespace

head_link::head_link(process_services& rt, const address& where,
                     credentials creds, std::string role)
  : rt_(rt)
  , where_(where)
  , creds_(std::move(creds))
  , role_(std::move(role)) {
  head_ = connect_control(rt_.system(), where_, creds_, "the head");
  id_ = say_hello(rt_.system(), head_, role_, "the head");
}

head_link::~head_link() {
  stop();
}

caf::actor head_link::get() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (lost_)
    throw unreachable("it went down");
  return head_;
}

bool head_link::lost() {
  std::lock_guard<std::mutex> guard{mtx_};
  return lost_;
}

error head_link::unreachable(const std::string& why) const {
  return error("the head at " + where_.to_string() + " is unreachable (" + why +
                 "): lumen::nodes(), named actors and new nodes need it. "
                 "Work on live nodes goes on, and this process rejoins a "
                 "head that comes back at that address",
               errc::head_unreachable);
}

void head_link::watch(std::function<void(const caf::actor& head)> on_back) {
  on_back_ = std::move(on_back);
  rt_.run_as_requester(
    [h = get()](caf::event_based_actor* self) { self->monitor(h); });
  rejoiner_ = std::thread{[this] { rejoin_loop(); }};
}

bool head_link::on_down(const caf::down_msg& msg) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!head_ || msg.source != head_.address())
    return false;
  if (lost_ || stopping_)
    return true; // news of a head already lost, or of this process ending
  lost_ = true;
  cv_.notify_all();
  log_line("lost the head at " + where_.to_string() + " (" +
           rt_.system().render(msg.reason) +
           "); work on live nodes goes on, and this process rejoins a head "
           "that comes back at that address");
  return true;
}

void head_link::stop() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    cv_.notify_all();
  }
  if (rejoiner_.joinable())
    rejoiner_.join();
}

std::string head_link::probe(const caf::actor& head) {
  // A node asks about its own id; a driver only whether the head answers.
  auto id = on_back_ ? this_node() : std::string{};
  std::string lost;
  caf::scoped_actor self{rt_.system()};
  self->request(head, probe_timeout, alive_atom::value, id)
    .receive(
      [&](bool alive) {
        if (!alive)
          lost = "it gave this node up for dead";
      },
      [&](caf::error& err) {
        // An answer a saturated link holds up is late, not lost, while
        // the head's pulses come (pulse.hpp); a head that stopped sends
        // none, and its link is closed.
        auto* pulses = pulse_service::of_this_process();
        if (err != caf::sec::request_timeout || !pulses ||
            !pulses->heard_from(where_, probe_timeout))
          lost = "it did not answer (" + rt_.system().render(err) + ")";
      });
  return lost;
}

void head_link::rejoin_loop() {
  std::unique_lock<std::mutex> guard{mtx_};
  for (;;) {
    if (!cv_.wait_for(guard, probe_interval,
                      [this] { return stopping_ || lost_; })) {
      auto head = head_;
      guard.unlock();
      auto why = probe(head);
      guard.lock();
      if (!why.empty() && !lost_ && !stopping_ && head_ == head) {
        lost_ = true;
        log_line("lost the head at " + where_.to_string() + ": " + why +
                 "; work on live nodes goes on, and this process rejoins a "
                 "head at that address");
      }
      continue;
    }
    if (stopping_)
      return;
    guard.unlock();
    auto back = try_rejoin();
    guard.lock();
    if (back) {
      head_ = back;
      lost_ = false;
      log_line("rejoined the head at " + where_.to_string() + " as " +
               this_node());
      rt_.run_as_requester(
        [back](caf::event_based_actor* self) { self->monitor(back); });
    } else {
      cv_.wait_for(guard, rejoin_interval, [this] { return stopping_.load(); });
    }
  }
}

caf::actor head_link::try_rejoin() {
  try {
    // A head back at its address answers at once; a silent host must not
    // hold up this process's shutdown for long.
    auto h = connect_control(rt_.system(), where_, creds_, "the head",
                             std::chrono::seconds(2));
    if (on_back_)
      on_back_(h);
    say_hello(rt_.system(), h, role_, "the head");
    failed_attempts_ = 0;
    return h;
  } catch (const std::exception& e) {
    // Said once, then every 20 attempts (10 s): why the head is not back.
    if (failed_attempts_++ % 20 == 0)
      log_line(std::string{"cannot rejoin the head yet: "} + e.what());
    return nullptr;
  }
}

} // namespace lumen::detail
