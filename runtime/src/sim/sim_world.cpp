#include "sim/sim_world.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "lumen/detail/object_state.hpp"
#include "lumen/errors.hpp"

#include "sim/sim_fiber.hpp"

namespace lumen::detail::sim {

namespace {

world* the_world = nullptr;
uint64_t runs = 0;

/// How often a fiber left waiting when the run ends is woken to unwind;
/// work that catches the error and waits again that often is left.
constexpr int unwind_tries = 3;

} // namespace

world::world(sim_options opts, std::string trace_file)
  : opts_(std::move(opts))
  , number_(++runs)
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
                        ", which is not a simulated node; " + node_range());
    if (!std::isfinite(factor) || factor <= 0)
      throw usage_error("--sim-slow: " + id +
                        "'s factor must be a positive number");
    slowness_[static_cast<size_t>(i)] = factor;
  }
  if (opts_.jitter.count() < 0)
    throw usage_error("--sim-jitter is negative; give 0 or more");
  base_slowness_ = slowness_;
  died_at_.assign(names_.size(), 0);
  known_down_.assign(names_.size(), false);
  link_free_.assign(names_.size() * names_.size(), 0);
  link_last_ = link_free_;
  link_cut_ = link_free_;
  in_flight_.resize(link_free_.size());
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
  capture_spans(true); // last: a constructor that throws never ends it
}

world::~world() {
  stop();
  capture_spans(false);
}

uint64_t world::draw() noexcept {
  // splitmix64: the same numbers on every platform, unlike the standard
  // library's distributions.
  uint64_t z = (rng_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string world::node_range() const {
  return "they are node-0 to node-" + std::to_string(nodes() - 1);
}

int world::node_index(const std::string& id) const {
  auto i = std::find(names_.begin(), names_.end(), id);
  return i == names_.end() ? -1 : static_cast<int>(i - names_.begin());
}

int world::here() const noexcept {
  return current_ != nullptr ? current_->node : 0;
}

void world::schedule(vtime at, std::function<void()> fn, bool background) {
  if (stopped_)
    return;
  foreground_ += background ? 0 : 1;
  events_.push(
    {std::max(at, now_), draw(), ++scheduled_, background, std::move(fn)});
}

bool world::step() {
  if (feeder_ && !stopped_)
    feeder_();
  return foreground_ > 0 && run_next();
}

bool world::run_next() {
  if (stopped_ || events_.empty())
    return false;
  // Moved out before the pop: only the function moves, the keys the
  // queue compares stay.
  auto fn = std::move(const_cast<item&>(events_.top()).fn);
  now_ = events_.top().at;
  foreground_ -= events_.top().background ? 0 : 1;
  events_.pop();
  fn();
  // What an event changed may be what a watch waits for; a woken watch
  // leaves the list when its wait returns.
  for (size_t i = 0; i < watchers_.size(); ++i)
    if ((*watchers_[i].ready)())
      watchers_[i].wake();
  return true;
}

bool world::watch(const std::function<bool()>& ready, vtime deadline) {
  auto id = ++watches_;
  struct unwatch {
    world& w;
    uint64_t id;
    ~unwatch() {
      auto& all = w.watchers_;
      all.erase(std::remove_if(all.begin(), all.end(),
                               [this](const watcher& x) { return x.id == id; }),
                all.end());
    }
  } leave{*this, id};
  return wait_until(ready, deadline,
                    [this, id, &ready](const std::function<void()>& wake) {
                      watchers_.push_back({id, &ready, wake});
                    });
}

const std::string& world::label(const std::string& text) {
  return *labels_.insert(text).first;
}

std::string world::waiting() const {
  std::string out;
  size_t n = 0;
  for (auto& f : fibers_) {
    if (!f->job || !f->parked || f->killed)
      continue;
    if (++n <= 4)
      out += std::string{n == 1 ? "" : ", "} + node_name(f->node) + "'s " +
             (f->doing != nullptr ? *f->doing : std::string{"work"});
  }
  if (n > 4)
    out += " and " + std::to_string(n - 4) + " more";
  return n == 0 ? "" : "; waiting: " + out;
}

void world::send(int from, int to, uint64_t bytes, const std::string& what,
                 uint64_t work, std::function<void()> arrive) {
  if (stopped_)
    return;
  auto message = ++messages_;
  record("send", from, to, what, bytes, work, message);
  vtime at = now_;
  vtime depart = now_;
  auto link = static_cast<size_t>(from * nodes() + to);
  if (from != to) {
    auto& free = link_free_[link];
    // Across a cut, the message leaves once the link is whole again.
    depart = std::max({now_, free, link_cut_[link]});
    auto per_second =
      static_cast<unsigned __int128>(std::llround(opts_.bandwidth));
    auto wire = static_cast<vtime>(static_cast<unsigned __int128>(bytes) *
                                   1000000000u / per_second);
    free = depart + wire;
    at = free + opts_.latency.count();
    if (auto jitter = opts_.jitter.count(); jitter > 0)
      at += static_cast<vtime>(draw() % static_cast<uint64_t>(jitter + 1));
    // In order on a link, as TCP delivers.
    auto& last = link_last_[link];
    at = std::max(at, last);
    last = at;
  }
  // A link delivers in order even where messages arrive at the same time
  // (events due at once run in the seed's order): each delivery event
  // takes the link's first message, not its own.
  in_flight_[link].push_back([this, from, to, what = &what, bytes, work,
                              message, depart, meant = incarnation(to),
                              sender = incarnation(from),
                              arrive = std::move(arrive)] {
    // Lost with its receiver (dead, or come back meanwhile), or with a
    // sender that died before the message got onto the wire.
    auto died = died_at_[static_cast<size_t>(from)];
    if (!alive(to) || incarnation(to) != meant ||
        (incarnation(from) != sender && died < depart)) {
      record("lost", to, from, *what, bytes, work, message);
      return;
    }
    record("deliver", to, from, *what, bytes, work, message);
    arrive();
  });
  schedule(at, [this, link] {
    auto next = std::move(in_flight_[link].front());
    in_flight_[link].pop_front();
    next();
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
      if (feeder_)
        feeder_();
      // Background events run while the script waits for a time, but
      // keep no wait for a result going.
      bool none = foreground_ == 0 && deadline == no_deadline;
      if (!none && !events_.empty() && events_.top().at <= deadline) {
        run_next();
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
                  "deadlock), or what it waits for was never started" +
                  waiting());
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

world* live() noexcept {
  return the_world;
}

void set_live(world* w) noexcept {
  the_world = w;
}

} // namespace lumen::detail::sim
