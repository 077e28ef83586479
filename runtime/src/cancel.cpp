// lumen::cancel and what it needs: the request each task and call records,
// passed on to the process the work was sent to, and the thread's running
// work that `cancelled()` reads.

#include "lumen/detail/runtime.hpp"
#include "lumen/errors.hpp"
#include "lumen/object_store.hpp"

#include "running_work.hpp"

namespace lumen {

namespace detail {

namespace {

thread_local const cancellable* current_work = nullptr;

// A weak_ptr never set, as opposed to one whose work is gone.
bool never_set(const std::weak_ptr<cancellable>& w) {
  std::weak_ptr<cancellable> empty;
  return !w.owner_before(empty) && !empty.owner_before(w);
}

} // namespace

running_scope::running_scope(const cancellable& work)
  : saved_(current_work) {
  current_work = &work;
}

running_scope::~running_scope() {
  current_work = saved_;
}

cancellable::~cancellable() = default;

void cancellable::forward_cancel(std::function<void(bool force)> f) {
  uint8_t request = 0;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    forward_ = f;
    request = request_.load(std::memory_order_acquire);
  }
  if (request != 0)
    f(request == 2);
}

void cancellable::cancel_now(object_state& result, const std::string& what,
                             bool force) {
  // The failure first: running work that sees the request and returns
  // must find its result taken already, not publish its value first.
  // Work about to start checks the result as well as the request.
  result.set_error(std::make_exception_ptr(
    task_cancelled(what + " was cancelled by lumen::cancel")));
  std::function<void(bool force)> forward;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (force || request_.load(std::memory_order_relaxed) == 0)
      request_.store(force ? 2 : 1, std::memory_order_release);
    forward = forward_;
  }
  if (forward)
    forward(force);
}

void cancel(object_state& st, bool force) {
  if (st.ready())
    return;
  auto work = st.maker.lock();
  if (work) {
    work->cancel(force);
    return;
  }
  if (!never_set(st.maker))
    return; // the work is just finishing: its result is being published
  if (st.lease() != nullptr)
    throw usage_error("lumen::cancel: this ref came from another process; "
                      "only the process that submitted the task or call can "
                      "cancel it (Ray's rule: the owner cancels)");
  throw usage_error("lumen::cancel: this ref is not the result of a task or an "
                    "actor method call (it comes from lumen::put, a "
                    "lumen::promise or a typed actor's request), so there is "
                    "nothing to cancel");
}

} // namespace detail

bool cancelled() {
  auto* work = detail::current_work;
  return work != nullptr && work->cancel_requested();
}

} // namespace lumen
