// lumen::cancel and what it needs: the request each task and call records,
// passed on to the process the work was sent to, and the thread's running
// work that `cancelled()` reads.

#include <thread>

#include "lumen/detail/runtime.hpp"
#include "lumen/errors.hpp"
#include "lumen/object_store.hpp"

#include "core/running_work.hpp"

namespace lumen {

namespace detail {

namespace {

thread_local const cancellable* current_work = nullptr;

std::exception_ptr cancelled_error(const std::string& what) {
  return std::make_exception_ptr(
    task_cancelled(what + " was cancelled by lumen::cancel"));
}

// forward_'s lock: taken only by cancels and sends to other processes.
class spin_guard {
public:
  explicit spin_guard(std::atomic_flag& flag)
    : flag_(flag) {
    while (flag_.test_and_set(std::memory_order_acquire))
      std::this_thread::yield();
  }
  ~spin_guard() {
    flag_.clear(std::memory_order_release);
  }

  spin_guard(const spin_guard&) = delete;
  spin_guard& operator=(const spin_guard&) = delete;

private:
  std::atomic_flag& flag_;
};

} // namespace

const cancellable*& running_work_slot() {
  return current_work;
}

running_scope::running_scope(const cancellable& work)
  : saved_(current_work) {
  current_work = &work;
}

running_scope::~running_scope() {
  current_work = saved_;
}

cancellable::cancellable(kind k, std::shared_ptr<object_state> result)
  : result_(std::move(result))
  , kind_(k) {
  result_->had_maker_ = true;
  result_->maker_.store(this, std::memory_order_release);
}

cancellable::~cancellable() {
  // seq_cst on both sides (here and in cancel(object_state&)): either the
  // cancel sees the pointer gone, or this sees its pin and waits the few
  // instructions it holds it for.
  cancellable* self = this;
  result_->maker_.compare_exchange_strong(self, nullptr);
  while (result_->maker_pins_.load() != 0)
    std::this_thread::yield();
}

void cancellable::forward_cancel(std::function<void(bool force)> f) {
  auto fresh = std::make_unique<std::function<void(bool force)>>(f);
  uint8_t request = 0;
  {
    spin_guard guard{forward_lock_};
    forward_.swap(fresh);
    request = request_.load(std::memory_order_acquire);
  }
  if (request != 0)
    f(request == 2);
}

void cancellable::cancel(bool force) {
  if (result_->ready())
    return;
  if (force && kind_ == kind::call)
    throw usage_error("lumen::cancel(force): " + work_name() +
                      " is an actor method call, and force would end its "
                      "actor; cancel it without force, or end the actor "
                      "with lumen::kill");
  if (force && started())
    throw usage_error("lumen::cancel(force): task " + work_name() +
                      " runs in this process, which force would end; cancel "
                      "it without force: its ref fails at once and the task "
                      "sees lumen::cancelled()");
  // The failure first: running work that sees the request and returns
  // must find its result taken already, not publish its value first.
  // Work about to start checks the result as well as the request.
  result_->set_error(
    cancelled_error((kind_ == kind::task ? "task " : "call ") + work_name()));
  std::function<void(bool force)> forward;
  {
    spin_guard guard{forward_lock_};
    if (force || request_.load(std::memory_order_relaxed) == 0)
      request_.store(force ? 2 : 1, std::memory_order_release);
    if (forward_)
      forward = *forward_;
  }
  if (forward)
    forward(force);
}

void cancel(object_state& st, bool force) {
  if (st.ready())
    return;
  std::shared_ptr<cancellable> work;
  st.maker_pins_.fetch_add(1);
  if (auto* maker = st.maker_.load())
    work = maker->weak_from_this().lock();
  st.maker_pins_.fetch_sub(1);
  if (work) {
    work->cancel(force);
    return;
  }
  if (st.had_maker_)
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
