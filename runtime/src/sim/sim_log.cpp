#include "sim/sim_world.hpp"

#include <cstdio>
#include <cstring>
#include <utility>

#include "lumen/errors.hpp"

#include "sim/sim_fiber.hpp"
#include "trace/trace_log.hpp"

// What a simulated run tells: its events (the log, the replay's check, the
// observer), its timeline and its summary.

namespace lumen::detail::sim {

namespace {

bool quiet = false;

uint64_t virtual_us() noexcept {
  auto* w = live();
  return w != nullptr ? static_cast<uint64_t>(w->time() / 1000) : 0;
}

void virtual_span(const char* name, const char* category, uint64_t start_us,
                  uint64_t end_us, const trace::detail::span_arg* args,
                  int nargs) noexcept {
  auto* w = live();
  if (w == nullptr)
    return;
  try {
    w->timeline_span(name, category, start_us, end_us, args, nargs);
  } catch (...) {
    // A span that cannot be kept is left out, as a full trace drops it.
  }
}

const trace::detail::simulated_timeline timeline_hooks{virtual_us,
                                                       virtual_span};

} // namespace

void world::capture_spans(bool on) {
  if (trace_file_.empty() && on)
    return;
  if (on) {
    trace::detail::simulate(&timeline_hooks);
    trace::detail::begin_recording();
    spans_captured_ = true;
  } else if (spans_captured_) {
    trace::detail::end_recording();
    trace::detail::simulate(nullptr);
    spans_captured_ = false;
  }
}

void world::record(const char* kind, int node, int peer,
                   const std::string& what, uint64_t bytes, uint64_t work,
                   uint64_t message) {
  if (stopped_)
    return; // the run is over: teardown is not part of it
  if (current_ != nullptr && std::strcmp(kind, "start") == 0)
    current_->doing = &what;
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

void world::timeline_span(const char* name, const char* category,
                          uint64_t start_us, uint64_t end_us,
                          const trace::detail::span_arg* args, int nargs) {
  if (trace_file_.empty() || stopped_)
    return;
  std::string e = "{\"ph\":\"X\",\"name\":";
  quote_json(e, name);
  e += ",\"cat\":";
  quote_json(e, category);
  e += ",\"pid\":" + std::to_string(here()) +
       ",\"tid\":1,\"ts\":" + std::to_string(start_us) +
       ",\"dur\":" + std::to_string(end_us - start_us) + ",\"args\":{";
  for (int i = 0; i < nargs; ++i) {
    if (i > 0)
      e += ',';
    quote_json(e, args[i].key);
    e += ':' + std::to_string(args[i].value);
  }
  timeline_.push_back(e + "}}");
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
        << ",\"tid\":0,\"args\":{\"name\":" << name << "}},\n"
        << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << i
        << ",\"tid\":1,\"args\":{\"name\":\"spans\"}},\n";
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

} // namespace lumen::detail::sim
