// The requester: the event-based actor that issues every request this
// process makes (typed CAF calls, remote tasks and actor calls, placement
// groups' reserves) and hears when a watched peer goes down.
#include "core/process_runtime.hpp"

#include <caf/all.hpp>

namespace lumen::detail {

namespace {

struct requester_job {
  std::function<void(caf::event_based_actor*)> fn;
};

} // namespace

} // namespace lumen::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(lumen::detail::requester_job)

namespace lumen::detail {

namespace {

caf::behavior requester(caf::event_based_actor* self,
                        std::function<void(const caf::down_msg&)> on_down) {
  self->set_down_handler([=](caf::down_msg& msg) { on_down(msg); });
  return {[=](requester_job& job) { job.fn(self); }};
}

} // namespace

void process_runtime::start_requester() {
  requester_ = sys_->spawn(requester, [this](const caf::down_msg& msg) {
    monitored_.erase(msg.source);
    auto i = watched_.find(msg.source);
    if (i != watched_.end()) {
      auto fails = std::move(i->second);
      watched_.erase(i);
      for (auto& [token, f] : fails)
        f();
    }
    if (on_down_)
      on_down_(msg);
  });
}

void process_runtime::hear_downs() {
  // Set on the requester's thread, the only one that reads it.
  run_as_requester([this, part = cluster_.get()](caf::event_based_actor*) {
    on_down_ = [part](const caf::down_msg& msg) { part->on_down(msg); };
  });
}

void process_runtime::run_as_requester(
  std::function<void(caf::event_based_actor*)> job) {
  caf::actor requester;
  {
    std::lock_guard<std::mutex> guard{requester_mtx_};
    requester = requester_;
  }
  // After shutdown began there is no requester: the job is dropped, and
  // what it would have answered fails as its state goes away.
  caf::anon_send(requester, requester_job{std::move(job)});
}

uint64_t process_runtime::watch(caf::event_based_actor* self,
                                const caf::actor& whom,
                                std::function<void()> fail) {
  auto& fails = watched_[whom.address()];
  if (monitored_.insert(whom.address()).second)
    self->monitor(whom); // once: each monitor delivers its own down_msg
  auto token = next_watch_++;
  fails.emplace(token, std::move(fail));
  return token;
}

void process_runtime::unwatch(const caf::actor_addr& whom, uint64_t token) {
  auto i = watched_.find(whom);
  if (i == watched_.end())
    return;
  i->second.erase(token);
  // The monitor stays: demonitoring here could race a down_msg in flight,
  // and the next watch of this actor reuses it.
}

} // namespace lumen::detail
