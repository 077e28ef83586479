#include "lumen/detail/object_state.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "lumen/detail/arguments.hpp"
#include "lumen/detail/runtime.hpp"
#include "lumen/errors.hpp"
#include "lumen/object_store.hpp"

#include "core/scheduling.hpp"
#include "core/spin.hpp"
#include "core/task_pool.hpp"

namespace lumen::detail {

namespace {

std::atomic<uint64_t> next_object_id{1};

// What a state's publisher and its waiters meet at. Shared among the
// states whose addresses hash alike: waiters wake for any of them and
// check their own. Never destroyed: threads may still park at exit.
struct alignas(64) meeting_point {
  std::mutex mtx;
  std::condition_variable cv;
};

meeting_point& meeting_point_of(const object_state* st) {
  constexpr unsigned bits = 6;
  static auto* points = new meeting_point[1u << bits];
  auto h = reinterpret_cast<uintptr_t>(st) * 0x9E3779B97F4A7C15ull;
  return points[h >> (64 - bits)];
}

} // namespace

object_state::object_state()
  : id_(next_object_id.fetch_add(1)) {}

object_state::~object_state() = default;

bool object_state::claim() {
  return !claimed_.exchange(true, std::memory_order_acq_rel);
}

void object_state::set_error(std::exception_ptr err) {
  if (!claim())
    return;
  error_ = std::move(err);
  publish(true);
}

// watchers_ counts parked readers in its low half and registered
// continuations in its high half. The publisher's store of the status and
// its load of watchers_, and a watcher's count and its check of the
// status, are seq_cst: either the publisher sees the watcher and takes the
// lock to hand over, or the watcher sees the status and does not wait.
// Nobody watching, a publication takes no lock.
constexpr uint64_t one_parked = 1;
constexpr uint64_t parked_mask = 0xffffffffu;
constexpr uint64_t one_continuation = uint64_t{1} << 32;

bool object_state::ready_seq_cst() const noexcept {
  return status_.load(std::memory_order_seq_cst) != status::pending;
}

void object_state::publish(bool failed) {
  status_.store(failed ? status::failed : status::ready,
                std::memory_order_seq_cst);
  if (watchers_.load(std::memory_order_seq_cst) == 0)
    return;
  std::vector<std::pair<uint64_t, std::function<void()>>> todo;
  {
    auto& point = meeting_point_of(this);
    std::lock_guard<std::mutex> guard{point.mtx};
    todo.swap(continuations_);
    if ((watchers_.load(std::memory_order_relaxed) & parked_mask) != 0)
      point.cv.notify_all();
  }
  for (auto& entry : todo)
    entry.second();
}

uint64_t object_state::on_ready(std::function<void()> fn) {
  uint64_t token = 0;
  {
    std::lock_guard<std::mutex> guard{meeting_point_of(this).mtx};
    if (!ready()) {
      watchers_.fetch_add(one_continuation, std::memory_order_seq_cst);
      if (!ready_seq_cst()) {
        token = next_token_++;
        continuations_.emplace_back(token, std::move(fn));
      }
    }
  }
  if (token == 0)
    fn();
  else
    demand();
  return token;
}

void object_state::forget(uint64_t token) {
  if (token == 0)
    return;
  std::function<void()> doomed; // destroyed outside the lock
  std::lock_guard<std::mutex> guard{meeting_point_of(this).mtx};
  for (auto i = continuations_.begin(); i != continuations_.end(); ++i)
    if (i->first == token) {
      doomed = std::move(i->second);
      continuations_.erase(i);
      return;
    }
}

bool object_state::wait_until(clock::time_point deadline) {
  return park_until(&deadline);
}

namespace {

scheduling* the_scheduling = nullptr;

} // namespace

scheduling::~scheduling() = default;

scheduling* current_scheduling() noexcept {
  return the_scheduling;
}

void set_scheduling(scheduling* s) noexcept {
  the_scheduling = s;
}

clock::time_point wait_clock_now() {
  if (auto* s = current_scheduling())
    return s->now();
  return clock::now();
}

bool object_state::park_until(const clock::time_point* deadline) {
  if (ready())
    return true;
  if (auto* s = current_scheduling()) {
    s->wait({this}, 1, deadline ? *deadline : clock::time_point::max());
    return ready();
  }
  demand();
  auto spin_end = clock::now() + get_spin_budget;
  if (deadline != nullptr)
    spin_end = std::min(spin_end, *deadline);
  if (util::spin_until([this] { return ready(); }, spin_end))
    return true;
  blocking_scope lend_a_worker;
  auto& point = meeting_point_of(this);
  std::unique_lock<std::mutex> guard{point.mtx};
  watchers_.fetch_add(one_parked, std::memory_order_seq_cst);
  auto is_ready = [this] { return ready_seq_cst(); };
  bool result = true;
  if (deadline == nullptr)
    point.cv.wait(guard, is_ready);
  else
    result = point.cv.wait_until(guard, *deadline, is_ready);
  watchers_.fetch_sub(one_parked, std::memory_order_relaxed);
  return result;
}

void when_all_ready(const std::vector<std::shared_ptr<object_state>>& deps,
                    std::function<void()> fn) {
  std::vector<object_state*> pending;
  for (auto& d : deps)
    if (!d->ready())
      pending.push_back(d.get());
  if (pending.empty()) {
    fn();
    return;
  }
  // One count per pending dep plus one for this function, so that fn cannot
  // run while continuations are still being attached. on_ready runs an
  // arrival at once for a dep that became ready in the meantime.
  auto counter = std::make_shared<std::atomic<size_t>>(pending.size() + 1);
  auto shared_fn = std::make_shared<std::function<void()>>(std::move(fn));
  auto arrive = [counter, shared_fn] {
    if (counter->fetch_sub(1) == 1)
      (*shared_fn)();
  };
  for (auto* d : pending)
    d->on_ready(arrive);
  arrive();
}

std::exception_ptr
first_error(const std::vector<std::shared_ptr<object_state>>& deps) {
  for (auto& d : deps)
    if (d->failed())
      return d->error();
  return nullptr;
}

std::exception_ptr capture_task_error(const std::string& function) {
  return std::make_exception_ptr(task_error{function, current_exception_type(),
                                            current_exception_message(),
                                            this_node()});
}

void throw_empty_ref(const char* api) {
  throw usage_error(std::string{api} +
                    ": the ObjectRef is empty (default-constructed or "
                    "moved from); use a ref returned by .remote() or "
                    "lumen::put()");
}

void throw_get_timeout(uint64_t id, clock::duration waited) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(waited);
  throw get_timeout("lumen::get: object " + std::to_string(id) +
                    " was not ready after " + std::to_string(ms.count()) +
                    " ms; pass a longer timeout or check the task that "
                    "produces it");
}

void await(object_state& st, clock::time_point deadline,
           clock::time_point started) {
  if (!st.wait_until(deadline))
    throw_get_timeout(st.id(), wait_clock_now() - started);
}

std::vector<bool> wait_states(const std::vector<object_state*>& states,
                              size_t num_returns, clock::time_point deadline) {
  if (num_returns > states.size())
    throw usage_error("lumen::wait: num_returns is " +
                      std::to_string(num_returns) + " but only " +
                      std::to_string(states.size()) +
                      " refs were given; ask for at most refs.size()");
  auto count_ready = [&] {
    return static_cast<size_t>(std::count_if(
      states.begin(), states.end(), [](auto* s) { return s->ready(); }));
  };
  if (auto* s = current_scheduling())
    s->wait(states, num_returns, deadline);
  else if (count_ready() < num_returns) {
    struct waiter {
      std::mutex mtx;
      std::condition_variable cv;
    };
    auto w = std::make_shared<waiter>();
    std::vector<uint64_t> tokens;
    tokens.reserve(states.size());
    for (auto* s : states)
      tokens.push_back(s->on_ready([w] {
        std::lock_guard<std::mutex> guard{w->mtx};
        w->cv.notify_all();
      }));
    {
      blocking_scope lend_a_worker;
      std::unique_lock<std::mutex> guard{w->mtx};
      w->cv.wait_until(guard, deadline,
                       [&] { return count_ready() >= num_returns; });
    }
    for (size_t i = 0; i < states.size(); ++i)
      states[i]->forget(tokens[i]);
  }
  std::vector<bool> flags(states.size(), false);
  size_t taken = 0;
  for (size_t i = 0; i < states.size() && taken < num_returns; ++i)
    if (states[i]->ready()) {
      flags[i] = true;
      ++taken;
    }
  return flags;
}

} // namespace lumen::detail
