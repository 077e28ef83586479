#pragma once

// A process's part of a trace: each thread appends what it records to a
// log of its own (a lock nobody else takes while recording), and the part
// is rendered as Chrome trace-event JSON when the driver collects it. A
// driver records from init to shutdown; a node records while a tracing
// driver is connected (trace_session.hpp asks it to).

#include <chrono>
#include <cstdint>
#include <string>

#include "lumen/trace.hpp"

namespace lumen::trace::detail {

/// Starts recording for one more user (this driver, or a driver a node
/// serves); recording stops, and what was recorded is dropped, when the
/// last one ends.
void begin_recording();
void end_recording();

/// Where a simulated run (lumen/sim.hpp) takes the script's own spans: its
/// clock, in virtual microseconds, and its timeline, on the row of the
/// simulated node the span ran on.
struct simulated_timeline {
  uint64_t (*now_us)() noexcept;
  void (*span)(const char* name, const char* category, uint64_t start_us,
               uint64_t end_us, const span_arg* args, int nargs) noexcept;
};

/// Sends spans to `to` from now on (null: back to this process's trace).
void simulate(const simulated_timeline* to) noexcept;

/// A fresh arrow id, unique across the cluster's processes (random base),
/// below 2^60.
uint64_t new_flow() noexcept;

/// How a span named at run time is named: `prefix` then `*stable`, a name
/// that outlives the trace (a registered function's or method's: kept by
/// address, not copied, on the hot path), or else `owned`.
struct span_name {
  const char* prefix = "";
  const std::string* stable = nullptr;
  std::string owned;
};

/// A span named at run time; `flow_in` is the arrow that ends at it,
/// `flow_out` one that starts there (0: none).
void record_runtime_span(span_name name, const char* category,
                         uint64_t start_us, uint64_t flow_in,
                         uint64_t flow_out) noexcept;

/// What a typed CAF actor's request over the data plane is called in a
/// trace, at both ends of its arrow (its message is not rendered).
extern const std::string typed_request_name;

/// Counts the runtime's spans under way (see settle).
void span_opened() noexcept;
void span_closed() noexcept;

/// Waits, at most `limit`, until no task or call is under way: one whose
/// result its caller has seen may still be closing its span.
void settle(std::chrono::milliseconds limit);

/// The runtime's span of a task, a call or a submission, named at run time:
/// recorded from construction to destruction if tracing was on at
/// construction (then `on()`, and the owner names it).
class runtime_span {
public:
  explicit runtime_span(const char* category, uint64_t flow_in = 0) noexcept
    : category_(category)
    , flow_in_(flow_in)
    , start_(enabled() ? now_us() : 0) {
    if (start_ != 0)
      span_opened();
  }

  ~runtime_span() {
    if (start_ == 0)
      return;
    record_runtime_span(std::move(name), category_, start_, flow_in_, flow_out);
    span_closed();
  }

  runtime_span(const runtime_span&) = delete;
  runtime_span& operator=(const runtime_span&) = delete;

  bool on() const noexcept {
    return start_ != 0;
  }

  /// Names it the submission of `what` (a registered name) and starts the
  /// arrow `flow` here; returns `flow`.
  uint64_t submits(const std::string& what, uint64_t flow = new_flow()) {
    name = {"submit ", &what, {}};
    flow_out = flow;
    return flow;
  }

  /// Records nothing after all.
  void drop() noexcept {
    if (start_ != 0)
      span_closed();
    start_ = 0;
  }

  span_name name;
  uint64_t flow_out = 0; // the arrow that starts here

private:
  const char* category_;
  uint64_t flow_in_;
  uint64_t start_;
};

/// This process's part: trace events (spans, arrows, the process's and
/// its threads' names), comma-separated, with timestamps moved by
/// `offset_us` onto the collector's clock and `pid` as the process id.
std::string render_part(int64_t offset_us, uint32_t pid,
                        const std::string& process_name);

/// Spans dropped because the part hit its bound.
size_t dropped_spans() noexcept;

} // namespace lumen::trace::detail
