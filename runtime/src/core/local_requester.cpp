#include "core/requester.hpp"

#include <utility>

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

caf::behavior requester_actor(caf::event_based_actor* self,
                              std::function<void(const caf::down_msg&)> down) {
  self->set_down_handler([=](caf::down_msg& msg) { down(msg); });
  return {[=](requester_job& job) { job.fn(self); }};
}

} // namespace

void requester::start(caf::actor_system& sys) {
  auto a = sys.spawn(requester_actor,
                     [this](const caf::down_msg& msg) { went_down(msg); });
  std::lock_guard<std::mutex> guard{mtx_};
  actor_ = std::move(a);
}

void requester::went_down(const caf::down_msg& msg) {
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
}

void requester::run(std::function<void(caf::event_based_actor*)> job) {
  caf::actor a;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    a = actor_;
  }
  caf::anon_send(a, requester_job{std::move(job)});
}

void requester::stop() {
  caf::actor a;
  {
    // Reader threads of the data plane may still ask for the requester.
    std::lock_guard<std::mutex> guard{mtx_};
    a.swap(actor_);
  }
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

void requester::hear_downs(std::function<void(const caf::down_msg&)> fn) {
  run([this, fn = std::move(fn)](caf::event_based_actor*) { on_down_ = fn; });
}

uint64_t requester::watch(caf::event_based_actor* self, const caf::actor& whom,
                          std::function<void()> fail) {
  auto& fails = watched_[whom.address()];
  if (monitored_.insert(whom.address()).second)
    self->monitor(whom); // once: each monitor delivers its own down_msg
  auto token = next_watch_++;
  fails.emplace(token, std::move(fail));
  return token;
}

void requester::unwatch(const caf::actor_addr& whom, uint64_t token) {
  auto i = watched_.find(whom);
  if (i == watched_.end())
    return;
  i->second.erase(token);
  // The monitor stays: demonitoring here could race a down_msg in flight,
  // and the next watch of this actor reuses it.
}

} // namespace lumen::detail
