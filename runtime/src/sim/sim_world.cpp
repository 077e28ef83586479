#include "sim/sim_world.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include "lumen/detail/object_state.hpp"
#include "lumen/errors.hpp"

#include "core/actor_host.hpp"
#include "core/running_work.hpp"

namespace lumen::detail::sim {

namespace {

world* the_world = nullptr;
bool quiet = false;

/// A fiber's stack; a guard page below it turns an overflow into a crash
/// at the spot instead of silent corruption.
constexpr size_t stack_bytes = 512 * 1024;

/// How often a fiber left waiting when the run ends is woken to unwind;
/// work that catches the error and waits again that often is left.
constexpr int unwind_tries = 3;

// AddressSanitizer must be told of each switch between stacks, or it
// takes a fiber's frames for the script's (sanitizer/common_interface_defs.h).
#if defined(__SANITIZE_ADDRESS__)
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom,
                                    size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save,
                                     const void** bottom_old, size_t* size_old);
}
#else
inline void __sanitizer_start_switch_fiber(void**, const void*, size_t) {}
inline void __sanitizer_finish_switch_fiber(void*, const void**, size_t*) {}
#endif

/// The script's stack, as ASan learns it at the first switch back.
const void* script_stack = nullptr;
size_t script_stack_size = 0;

} // namespace

/// A fiber and what the work on it keeps of the thread it shares with
/// every other fiber.
class fiber {
public:
  boost::context::fiber ctx;  // the fiber, while it does not run
  boost::context::fiber back; // the scheduler, while it runs
  std::function<void()> job;  // empty once done: the fiber is idle
  std::exception_ptr failure; // what escaped the job, for the driver
  int node = 0;
  bool killed = false; // its node died: it never runs again
  bool parked = false;
  uint64_t park_id = 0; // a wake for an earlier park is stale
  // The thread-locals of its work, swapped in while it runs.
  const cancellable* work = nullptr;
  std::string actor;
  // Its stack, and what ASan keeps of it while it is switched out.
  const void* stack = nullptr;
  size_t stack_size = 0;
  void* fake_stack = nullptr;

  /// Switches from the fiber back to the script; `last`: for good.
  void yield(bool last = false) {
    __sanitizer_start_switch_fiber(last ? nullptr : &fake_stack, script_stack,
                                   script_stack_size);
    if (!last)
      back = std::move(back).resume();
  }

  /// Where a switch into the fiber lands.
  void arrived() {
    __sanitizer_finish_switch_fiber(fake_stack, &script_stack,
                                    &script_stack_size);
  }
};

namespace {

/// The fibers' stacks, each recorded in its fiber (for ASan); a guard
/// page below each.
class recorded_stack {
public:
  explicit recorded_stack(fiber& f)
    : f_(&f) {}

  boost::context::stack_context allocate() {
    auto sc = inner_.allocate();
    f_->stack = static_cast<char*>(sc.sp) - sc.size;
    f_->stack_size = sc.size;
    return sc;
  }
  void deallocate(boost::context::stack_context& sc) noexcept {
    inner_.deallocate(sc);
  }

private:
  boost::context::protected_fixedsize_stack inner_{stack_bytes};
  fiber* f_;
};

} // namespace

world::world(sim_options opts, std::string trace_file)
  : opts_(std::move(opts))
  , owner_(std::this_thread::get_id())
  , trace_file_(std::move(trace_file)) {
  if (opts_.nodes < 1 || opts_.nodes > 1024)
    throw usage_error("--sim-nodes is " + std::to_string(opts_.nodes) +
                      "; give 1 to 1024 simulated nodes");
  if (opts_.latency.count() < 0)
    throw usage_error("--sim-link: the latency is negative; give 0 or more");
  if (!std::isfinite(opts_.bandwidth) || opts_.bandwidth < 1)
    throw usage_error("--sim-link: the bandwidth must be at least 1 byte "
                      "per second");
  for (int i = 0; i < opts_.nodes; ++i)
    names_.push_back("node-" + std::to_string(i));
  slowness_.assign(names_.size(), 1.0);
  alive_.assign(names_.size(), true);
  incarnation_.assign(names_.size(), 0);
  for (auto& [id, factor] : opts_.slow) {
    auto i = node_index(id);
    if (i < 0)
      throw usage_error("--sim-slow names " + id +
                        ", which is not a simulated node; they are node-0 "
                        "to node-" +
                        std::to_string(opts_.nodes - 1));
    if (!std::isfinite(factor) || factor <= 0)
      throw usage_error("--sim-slow: " + id +
                        "'s factor must be a positive number");
    slowness_[static_cast<size_t>(i)] = factor;
  }
  if (opts_.jitter.count() < 0)
    throw usage_error("--sim-jitter is negative; give 0 or more");
  link_free_.assign(names_.size() * names_.size(), 0);
  link_last_ = link_free_;
  if (!opts_.replay_file.empty()) {
    std::ifstream in{opts_.replay_file};
    if (!in)
      throw usage_error("--sim-replay: cannot read " + opts_.replay_file +
                        "; give a log that --sim-log wrote");
    for (std::string line; std::getline(in, line);)
      replay_.push_back(line);
    replaying_ = true;
  }
  rng_ = opts_.seed;
  if (!opts_.log_file.empty()) {
    log_.open(opts_.log_file, std::ios::trunc);
    if (!log_)
      throw usage_error("--sim-log: cannot write " + opts_.log_file +
                        "; give a path in a folder that exists");
  }
}

world::~world() {
  stop();
}

uint64_t world::draw() noexcept {
  // splitmix64: the same numbers on every platform, unlike the standard
  // library's distributions.
  uint64_t z = (rng_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int world::node_index(const std::string& id) const {
  auto i = std::find(names_.begin(), names_.end(), id);
  return i == names_.end() ? -1 : static_cast<int>(i - names_.begin());
}

int world::here() const noexcept {
  return current_ != nullptr ? current_->node : 0;
}

void world::schedule(vtime at, std::function<void()> fn) {
  if (stopped_)
    return;
  events_.push({std::max(at, now_), draw(), ++scheduled_, std::move(fn)});
}

bool world::step() {
  if (stopped_ || events_.empty())
    return false;
  // Moved out before the pop: only the function moves, the keys the
  // queue compares stay.
  auto fn = std::move(const_cast<item&>(events_.top()).fn);
  now_ = events_.top().at;
  events_.pop();
  fn();
  return true;
}

void world::record(const char* kind, int node, int peer,
                   const std::string& what, uint64_t bytes, uint64_t work,
                   uint64_t message) {
  if (stopped_)
    return; // the run is over: teardown is not part of it
  ++recorded_;
  if (!trace_file_.empty())
    timeline_event(kind, node, what, work, message);
  if (!observer_ && !log_.is_open() && !replaying_)
    return;
  lumen::sim::event e{recorded_,
                      std::chrono::nanoseconds{now_},
                      kind,
                      node_name(node),
                      peer < 0 ? std::string{} : node_name(peer),
                      what,
                      bytes,
                      work};
  auto line = lumen::sim::to_json(e);
  if (replaying_ && (e.seq > replay_.size() || replay_[e.seq - 1] != line)) {
    // The first event that differs ends the run: what follows it would
    // differ for its sake.
    diverged_ = true;
    stopped_ = true;
    events_ = {};
    throw error("--sim-replay: event " + std::to_string(e.seq) +
                " differs from " + opts_.replay_file + ": the run has " + line +
                ", the log " +
                (e.seq > replay_.size()
                   ? "ends after " + std::to_string(replay_.size()) + " events"
                   : "has " + replay_[e.seq - 1]));
  }
  if (log_.is_open())
    log_ << line << '\n';
  if (observer_)
    observer_(e);
}

void world::send(int from, int to, uint64_t bytes, const std::string& what,
                 uint64_t work, std::function<void()> arrive) {
  if (stopped_)
    return;
  auto message = ++messages_;
  record("send", from, to, what, bytes, work, message);
  vtime at = now_;
  if (from != to) {
    auto& free = link_free_[static_cast<size_t>(from * nodes() + to)];
    auto depart = std::max(now_, free);
    auto per_second =
      static_cast<unsigned __int128>(std::llround(opts_.bandwidth));
    auto wire = static_cast<vtime>(static_cast<unsigned __int128>(bytes) *
                                   1000000000u / per_second);
    free = depart + wire;
    at = free + opts_.latency.count();
    if (auto jitter = opts_.jitter.count(); jitter > 0)
      at += static_cast<vtime>(draw() % static_cast<uint64_t>(jitter + 1));
    // In order on a link, as TCP delivers.
    auto& last = link_last_[static_cast<size_t>(from * nodes() + to)];
    at = std::max(at, last);
    last = at;
  }
  schedule(at, [this, from, to, what = &what, bytes, work, message,
                meant = incarnation(to), arrive = std::move(arrive)] {
    if (incarnation(to) != meant) {
      record("lost", to, from, *what, bytes, work, message);
      return; // its receiver died (and maybe came back) meanwhile
    }
    record("deliver", to, from, *what, bytes, work, message);
    arrive();
  });
}

fiber& world::idle_fiber() {
  if (!idle_.empty()) {
    auto* f = idle_.back();
    idle_.pop_back();
    return *f;
  }
  fibers_.push_back(std::make_unique<fiber>());
  auto* f = fibers_.back().get();
  f->ctx = boost::context::fiber{std::allocator_arg, recorded_stack{*f},
                                 [f](boost::context::fiber&& back) {
                                   f->back = std::move(back);
                                   f->arrived();
                                   // Resumed with nothing to do: the run is
                                   // over.
                                   while (f->job) {
                                     try {
                                       f->job();
                                     } catch (...) {
                                       f->failure = std::current_exception();
                                     }
                                     f->job = nullptr;
                                     f->yield();
                                     f->arrived();
                                   }
                                   f->yield(true);
                                   return std::move(f->back);
                                 }};
  return *f;
}

void world::resume(fiber& f) {
  current_ = &f;
  std::swap(running_work_slot(), f.work);
  std::swap(current_actor_slot(), f.actor);
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, f.stack_size);
  f.ctx = std::move(f.ctx).resume();
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
  std::swap(running_work_slot(), f.work);
  std::swap(current_actor_slot(), f.actor);
  current_ = nullptr;
  if (!f.job && f.ctx)
    idle_.push_back(&f);
  // Work reports its own errors; what escapes it is the runtime's bug,
  // thrown where the driver steps the run rather than lost on a fiber.
  if (f.failure)
    std::rethrow_exception(std::exchange(f.failure, nullptr));
}

void world::run_on(int node, std::function<void()> body) {
  schedule(now_, [this, node, meant = incarnation(node),
                  body = std::move(body)]() mutable {
    if (incarnation(node) != meant)
      return; // its node died before it began
    auto& f = idle_fiber();
    f.node = node;
    f.job = std::move(body);
    resume(f);
  });
}

bool world::wait_until(
  const std::function<bool()>& ready, vtime deadline,
  const std::function<void(const std::function<void()>&)>& arm) {
  if (ready())
    return true;
  if (current_ == nullptr) {
    // The driver is the scheduler: it runs the run until it may go on.
    while (!ready()) {
      if (stopped_)
        throw error("lumen: the simulated run was stopped");
      bool none = events_.empty();
      if (!none && events_.top().at <= deadline) {
        step();
        continue;
      }
      if (deadline != no_deadline) {
        now_ = std::max(now_, deadline);
        return ready();
      }
      throw error("simulated run (seed " + std::to_string(opts_.seed) +
                  "): nothing is left to happen at " + std::to_string(now_) +
                  " ns, yet the script waits: every task and call still "
                  "running waits for something that will not come (a "
                  "deadlock), or what it waits for was never started");
    }
    return true;
  }
  auto& f = *current_;
  for (;;) {
    if (stopped_)
      throw error("lumen: the simulated run ended while this work waited");
    auto id = ++f.park_id;
    f.parked = true;
    auto wake = [this, &f, id] {
      if (f.park_id != id || !f.parked)
        return;
      f.parked = false;
      schedule(now_, [this, &f, id] {
        if (f.park_id == id && !f.killed)
          resume(f);
      });
    };
    arm(wake);
    if (deadline != no_deadline)
      schedule(deadline, wake);
    if (f.parked && !ready())
      park(f);
    f.parked = false;
    ++f.park_id; // what is still scheduled for this park is stale now
    if (ready())
      return true;
    if (now_ >= deadline)
      return false;
  }
}

void world::kill(int i) {
  if (!alive(i))
    return;
  alive_[static_cast<size_t>(i)] = false;
  ++incarnation_[static_cast<size_t>(i)];
  for (auto& f : fibers_)
    if (f->job && f->node == i)
      f->killed = true;
  static const std::string none;
  record("kill", i, -1, none, 0, 0);
}

void world::revive(int i) {
  if (alive(i))
    return;
  alive_[static_cast<size_t>(i)] = true;
  ++incarnation_[static_cast<size_t>(i)];
  static const std::string none;
  record("restart", i, -1, none, 0, 0);
}

scheduling::clock::time_point world::now() {
  return clock::time_point{std::chrono::nanoseconds{now_}};
}

void world::wait(const std::vector<object_state*>& states, size_t need,
                 clock::time_point deadline) {
  if (std::this_thread::get_id() != owner_)
    throw usage_error("lumen: in a simulated run only the script's thread "
                      "and its tasks and actors may wait (get, wait); this "
                      "is another thread");
  auto count = [&] {
    size_t n = 0;
    for (auto* s : states)
      n += s->ready() ? 1 : 0;
    return n;
  };
  vtime until = deadline == clock::time_point::max()
                  ? no_deadline
                  : std::chrono::duration_cast<std::chrono::nanoseconds>(
                      deadline.time_since_epoch())
                      .count();
  std::vector<std::pair<object_state*, uint64_t>> armed;
  auto forget = [&] {
    for (auto& [s, token] : armed)
      s->forget(token);
    armed.clear();
  };
  try {
    wait_until([&] { return count() >= need; }, until,
               [&](const std::function<void()>& wake) {
                 forget();
                 for (auto* s : states)
                   if (!s->ready())
                     armed.emplace_back(s, s->on_ready(wake));
               });
  } catch (...) {
    forget();
    throw;
  }
  forget();
}

std::string world::node() {
  return node_name(here());
}

void world::park(fiber& f) {
  f.yield();
  f.arrived();
}

void world::sleep(vtime d) {
  wait_until([] { return false; }, now_ + std::max<vtime>(d, 0),
             [](const std::function<void()>&) {});
}

vtime world::compute_time(double seconds) const {
  if (!std::isfinite(seconds) || seconds < 0)
    throw usage_error("lumen::sim::charge: the compute time must be a "
                      "finite number of seconds, 0 or more");
  return static_cast<vtime>(
    std::llround(seconds * slowness_[static_cast<size_t>(here())] * 1e9));
}

void world::stop() {
  if (current_ != nullptr)
    throw usage_error("lumen: the simulated run cannot end from inside a task "
                      "or method; end it from the script (lumen::shutdown)");
  stopped_ = true;
  events_ = {};
  // Work left waiting, on a dead node too, wakes to an error and unwinds
  // as any exception would; an idle fiber resumed without a job returns.
  // A fiber is never destroyed while its work is suspended: Boost's
  // forced unwinding would pass through the work's catch (...), which
  // swallows it (named_task and named_call catch all).
  auto unwind = [this](fiber& f) {
    try {
      resume(f);
    } catch (...) {
      // The run is over: what its work throws on the way out goes nowhere.
    }
  };
  for (int attempt = 0; attempt < unwind_tries; ++attempt)
    for (auto& f : fibers_)
      if (f->ctx && f->job)
        unwind(*f);
  for (auto& f : fibers_)
    if (f->ctx && !f->job)
      unwind(*f);
  idle_.clear();
  for (auto& f : fibers_)
    if (f->ctx && f->job)
      (void)f.release(); // work that waits on however often it is woken
  fibers_.clear();
}

void world::timeline_event(const char* kind, int node, const std::string& what,
                           uint64_t work, uint64_t message) {
  // Work is an async span of its node's process, by its number; a message
  // between nodes an arrow, by its own.
  std::string ph, cat, id;
  std::string k = kind;
  if (k == "start" || k == "finish") {
    ph = k == "start" ? "b" : "e";
    cat = "work";
    id = std::to_string(work);
  } else if ((k == "send" || k == "deliver") && message != 0) {
    ph = k == "send" ? "s" : "f";
    cat = "message";
    id = std::to_string(message);
  } else {
    return;
  }
  std::string name;
  quote_json(name, what);
  char ts[40];
  std::snprintf(ts, sizeof(ts), "%.3f", static_cast<double>(now_) / 1e3);
  timeline_.push_back(
    "{\"ph\":\"" + ph + "\",\"cat\":\"" + cat + "\",\"name\":" + name +
    ",\"id\":" + id + ",\"pid\":" + std::to_string(node) +
    ",\"tid\":0,\"ts\":" + ts + (ph == "f" ? ",\"bp\":\"e\"}" : "}"));
}

std::string world::write_timeline() {
  if (trace_file_.empty())
    return {};
  std::ofstream out{trace_file_, std::ios::trunc};
  if (!out)
    throw error("--trace: cannot write " + trace_file_);
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  for (int i = 0; i < nodes(); ++i) {
    std::string name;
    quote_json(name, node_name(i) + " (simulated)");
    out << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << i
        << ",\"tid\":0,\"args\":{\"name\":" << name << "}},\n";
  }
  for (size_t i = 0; i < timeline_.size(); ++i)
    out << timeline_[i] << (i + 1 < timeline_.size() ? ",\n" : "\n");
  out << "]}\n";
  return std::exchange(trace_file_, {});
}

std::string world::summary() const {
  char took[32];
  std::snprintf(took, sizeof(took), "%.6f", static_cast<double>(now_) / 1e9);
  auto out = "simulated run, seed " + std::to_string(opts_.seed) + ": " + took +
             " s of virtual time, " + std::to_string(recorded_) + " events";
  if (replaying_ && !diverged_)
    out += recorded_ == replay_.size()
             ? ", the same as " + opts_.replay_file
             : "; " + opts_.replay_file + " has " +
                 std::to_string(replay_.size()) + " (the run stopped first)";
  return out;
}

bool summaries_quiet() noexcept {
  return quiet;
}

void quiet_summaries(bool q) noexcept {
  quiet = q;
}

world* live() noexcept {
  return the_world;
}

void set_live(world* w) noexcept {
  the_world = w;
}

} // namespace lumen::detail::sim
