#pragma once

// The simulated cluster's engine: virtual time, the seeded order of
// events, the network between simulated nodes, the fibers that run work,
// and the log.
//
// One OS thread, the script's, runs everything. The script itself runs on
// the thread's own stack and is the scheduler: whenever it waits
// (lumen::get, wait, sleep_for, sim::step) it runs events until what it
// waits for is there. Work (a task, a method call, an actor's
// construction) runs on a fiber (Boost.Context); a fiber that waits parks
// and yields back to the scheduler, and what it waits for wakes it with an
// event. So exactly one piece of user code runs at a time, and a blocking
// call inside work stalls no one else.
//
// An event is a closure due at a virtual time. Events due at the same time
// run in an order drawn from the seed: each draws a random rank when it is
// scheduled, and since the run schedules its events in an order fixed by
// the script and the ranks drawn before, the seed fixes the whole run.
// Nothing reads the wall clock, an address, a thread id or a hash table's
// order (FoundationDB's deterministic simulation, TigerBeetle's VOPR).

#include <chrono>
#include <cstdint>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lumen/init.hpp"
#include "lumen/sim.hpp"
#include "lumen/trace.hpp"

#include "core/scheduling.hpp"

namespace lumen::detail::sim {

/// Virtual nanoseconds since the run began.
using vtime = int64_t;

/// A wait without a deadline.
inline constexpr vtime no_deadline = INT64_MAX;

class fiber;

/// The run: also the scheduling of the script's waits (core/scheduling.hpp).
class world final : public scheduling {
public:
  /// Throws `usage_error` for settings out of range. With `trace_file`,
  /// the run's events are written there at its end as a timeline in
  /// virtual time (trace-event JSON for Perfetto).
  explicit world(sim_options opts, std::string trace_file = {});
  ~world() override;

  world(const world&) = delete;
  world& operator=(const world&) = delete;

  const sim_options& options() const noexcept {
    return opts_;
  }

  vtime time() const noexcept {
    return now_;
  }

  /// The next number of the run's seeded sequence.
  uint64_t draw() noexcept;

  /// A new work number (a task, a call, a spawn), from 1.
  uint64_t new_work() noexcept {
    return ++works_;
  }

  int nodes() const noexcept {
    return static_cast<int>(names_.size());
  }
  const std::string& node_name(int i) const {
    return names_[static_cast<size_t>(i)];
  }
  /// "they are node-0 to node-N", for errors naming a wrong node.
  std::string node_range() const;

  /// The index of node `id`, or -1.
  int node_index(const std::string& id) const;

  /// The node the running code is on: its fiber's; node 0 for the driver.
  int here() const noexcept;

  /// Whether node `i` runs; its incarnation counts its deaths and
  /// restarts, so that what was meant for an earlier one is dropped.
  bool alive(int i) const noexcept {
    return alive_[static_cast<size_t>(i)];
  }
  uint64_t incarnation(int i) const noexcept {
    return incarnation_[static_cast<size_t>(i)];
  }

  /// Kills node `i` now (`cause`, for the log: "" or "partition"): the
  /// work on it never runs again, what is sent to it is lost, and so is
  /// what it sent that still waits for its link.
  void kill(int i, const std::string& cause = {});

  /// Brings node `i` back, empty.
  void revive(int i);

  /// Whether the cluster knows node `i` is down (set_known_down), until
  /// it is revived.
  bool known_down(int i) const noexcept {
    return known_down_[static_cast<size_t>(i)];
  }
  void set_known_down(int i) {
    known_down_[static_cast<size_t>(i)] = true;
  }

  /// lumen::sim::wait_for: waits until `ready()`, checked after every
  /// event, or the virtual time `deadline`.
  bool watch(const std::function<bool()>& ready, vtime deadline);

  /// A name for the log that lives as long as the run.
  const std::string& label(const std::string& text);

  /// This run's number in the process, from 1.
  uint64_t number() const noexcept {
    return number_;
  }

  /// True while work (a fiber) runs, false on the driver.
  bool in_work() const noexcept {
    return current_ != nullptr;
  }

  /// Schedules `fn` at `at` (now at the earliest). A `background` event
  /// (chaos drawn from the seed) keeps no wait alive: a run whose only
  /// events left are background ones has nothing left to happen.
  void schedule(vtime at, std::function<void()> fn, bool background = false);

  /// Runs the next event; false if nothing but background events is left.
  bool step();

  /// Cuts the links between the nodes marked in `side` and the others
  /// until `heal` (a cut already longer stays): what is sent across waits.
  void cut(const std::vector<bool>& side, vtime heal);

  /// Node `i`'s slowness: `factor` times what `--sim-slow` set.
  void slow(int i, double factor);

  /// Records an event of `kind` at node `node` (`peer`: the other end of
  /// a message, or -1) for work `what` (a name that outlives the run):
  /// numbered and stamped with the time; the log, the replay and the
  /// observer see it, and it is built only if one of them looks.
  void record(const char* kind, int node, int peer, const std::string& what,
              uint64_t bytes, uint64_t work, uint64_t message = 0);

  void observe(std::function<void(const lumen::sim::event&)> fn) {
    observer_ = std::move(fn);
  }

  /// Sends a message of `bytes` from node `from` to node `to` (`what`, a
  /// name that outlives the run, and `work` name it in the log); `arrive`
  /// runs when it is there. A link
  /// carries one message at a time: a message waits for those sent before
  /// it on the same link, then takes bytes / bandwidth on the wire, then
  /// the latency. A message to the same node arrives at once.
  void send(int from, int to, uint64_t bytes, const std::string& what,
            uint64_t work, std::function<void()> arrive);

  /// Runs `body` on a fiber of node `node`, from an event due now. `body`
  /// must not throw.
  void run_on(int node, std::function<void()> body);

  /// Runs `body` on a fiber of node `node` at once, from an event.
  void start_on(int node, std::function<void()> body);

  /// Runs `body` on a fiber of its own from an event due now, on the
  /// running code's node and as the same actor: what a thread beside it
  /// would run. `body` must not throw.
  void run_beside(std::function<void()> body);

  /// `fn` runs whenever the run looks for its next event, to add the
  /// events of work that waits outside it (typed actors with messages).
  void feed_from(std::function<void()> fn) {
    feeder_ = std::move(fn);
  }

  /// The typed CAF actor whose handler runs (its CAF id), or 0; set by
  /// the code that runs one on a fiber.
  uint64_t typed_actor() const noexcept;
  void set_typed_actor(uint64_t id) noexcept;

  /// Waits until `ready()` or the virtual time `deadline`, and returns
  /// ready(). The driver runs events meanwhile (and throws `error` if none
  /// is left: nothing could make it ready); work parks, and `arm(wake)`
  /// gets the function that wakes it, for what may make it ready to call.
  bool wait_until(const std::function<bool()>& ready, vtime deadline,
                  const std::function<void(const std::function<void()>&)>& arm);

  // scheduling: virtual time, waits that run the run, the node of the
  // running code. Waits from another thread than the script's are refused.
  clock::time_point now() override;
  void wait(const std::vector<object_state*>& states, size_t need,
            clock::time_point deadline) override;
  std::string node() override;

  /// Waits `d` of virtual time.
  void sleep(vtime d);

  /// Virtual nanoseconds of `seconds` of compute on the running code's
  /// node (its slowness applied).
  vtime compute_time(double seconds) const;

  /// Ends the run: parked work wakes to an error, and no event runs after.
  void stop();

  /// A span of the script's own (lumen::trace::span) on the running
  /// code's node, for the timeline.
  void timeline_span(const char* name, const char* category, uint64_t start_us,
                     uint64_t end_us, const trace::detail::span_arg* args,
                     int nargs);

  /// Writes the timeline, if one was asked for: a process per node, a
  /// span per piece of work, an arrow per message between nodes. Returns
  /// the file written, or "".
  std::string write_timeline();

  /// What the run was, a line for the end of it: its seed, virtual time
  /// and events, and how it kept to the log it replayed.
  std::string summary() const;

private:
  struct item {
    vtime at;
    uint64_t rank; // drawn from the seed: the order among events due at once
    uint64_t seq;  // never equal: the order is total
    bool background;
    std::function<void()> fn;
  };
  struct later {
    bool operator()(const item& a, const item& b) const noexcept {
      if (a.at != b.at)
        return a.at > b.at;
      if (a.rank != b.rank)
        return a.rank > b.rank;
      return a.seq > b.seq;
    }
  };

  /// Takes the script's spans into the timeline (`on`), or gives them
  /// back to the process's trace.
  void capture_spans(bool on);

  /// Runs the next event, background or not; false if none is left. Its
  /// callers (step, a driver's wait) feed the queue first.
  bool run_next();
  void timeline_event(const char* kind, int node, const std::string& what,
                      uint64_t work, uint64_t message);
  void resume(fiber& f);
  fiber& idle_fiber();
  void park(fiber& f);

  /// ": waiting are node-1's scratch::Worker::step, ..." for a deadlock's
  /// message: the work parked now and what it runs; "" if none is.
  std::string waiting() const;

  sim_options opts_;
  std::vector<std::string> names_;
  std::vector<double> slowness_;
  std::vector<double> base_slowness_; // --sim-slow's
  std::vector<vtime> died_at_;
  std::vector<bool> known_down_;
  // The waits of watch(): what each waits for and what wakes it.
  struct watcher {
    uint64_t id;
    const std::function<bool()>* ready;
    std::function<void()> wake;
  };
  std::vector<watcher> watchers_;
  uint64_t watches_ = 0;
  std::set<std::string> labels_;
  uint64_t number_;
  std::vector<bool> alive_;
  std::vector<uint64_t> incarnation_;
  uint64_t rng_;
  vtime now_ = 0;
  uint64_t works_ = 0;
  uint64_t scheduled_ = 0;
  uint64_t recorded_ = 0;
  bool stopped_ = false;
  std::priority_queue<item, std::vector<item>, later> events_;
  uint64_t foreground_ = 0; // events queued that are not background
  // When each directed link is free again, and when its last message
  // arrives, [from * nodes + to].
  std::vector<vtime> link_free_;
  std::vector<vtime> link_last_;
  std::vector<vtime> link_cut_; // ... and until when it is cut
  std::vector<std::deque<std::function<void()>>> in_flight_; // ... in order
  // The log a replay checks the run against, a line an event.
  std::vector<std::string> replay_;
  bool replaying_ = false;
  bool diverged_ = false;
  std::vector<std::unique_ptr<fiber>> fibers_;
  std::vector<fiber*> idle_;
  fiber* current_ = nullptr;
  std::thread::id owner_; // the script's thread
  std::ofstream log_;
  std::string trace_file_;
  bool spans_captured_ = false;
  std::vector<std::string> timeline_; // its events, as JSON
  uint64_t messages_ = 0;
  std::function<void(const lumen::sim::event&)> observer_;
  std::function<void()> feeder_;
};

/// The world of the simulated run in progress, or null.
world* live() noexcept;

/// Makes `w` the world of the run in progress (null: none).
void set_live(world* w) noexcept;

/// Whether the end of a run prints its summary: not in a sweep.
bool summaries_quiet() noexcept;
void quiet_summaries(bool quiet) noexcept;

/// Appends `s` to `out` as a JSON string.
void quote_json(std::string& out, const std::string& s);

/// A time with its unit (`50us`, `1.5ms`); throws `usage_error`.
std::chrono::nanoseconds parse_duration(const std::string& text);

/// Parses `--sim-link`'s LATENCY,BANDWIDTH (`50us,10Gbit`, `1ms,125MB`)
/// into `opts`; throws `usage_error` saying what is wrong.
void parse_link(const std::string& text, sim_options& opts);

} // namespace lumen::detail::sim
