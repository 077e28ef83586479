#include "trace/trace_log.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace lumen::trace {

namespace detail {

std::atomic<bool> recording{false};

const std::string typed_request_name = "typed request";

namespace {

// Spans a process keeps at most (~100 bytes each): a long run still fits
// in memory and in a file a viewer opens.
constexpr size_t max_spans = size_t{1} << 20;

struct event {
  span_name name; // a literal's is its prefix
  const char* category;
  uint64_t start;
  uint64_t duration;
  uint64_t flow_in;
  uint64_t flow_out;
  span_arg args[4];
  int nargs;
  uint64_t async_id = 0; // an async span's, else 0
};

// A thread takes spans from the bound this many at a time: recording
// touches no counter that threads share.
constexpr size_t quota_batch = 256;

constexpr size_t block_events = 4096;

struct thread_log {
  std::mutex mtx;
  uint32_t tid = 0;
  std::string name; // under mtx
  // In blocks that never move once filled: a growing log copies nothing.
  std::vector<std::vector<event>> blocks; // under mtx
  // Spans left of what it took; its thread's alone, kept across recordings
  // (the bound is loose by a batch a thread).
  size_t quota = 0;
  std::atomic<int> open{0}; // its runtime spans under way
};

struct state {
  std::mutex mtx;
  std::vector<std::shared_ptr<thread_log>> logs; // under mtx
  int users = 0;                                 // under mtx
  std::atomic<size_t> spans{0};                  // handed out as quotas
  std::atomic<size_t> dropped{0};
};

// Never destroyed: threads may record while statics are torn down.
state& the_state() {
  static auto* st = new state;
  return *st;
}

thread_local std::shared_ptr<thread_log> this_thread_log;
thread_local std::string this_thread_name;

thread_log& my_log() {
  if (!this_thread_log) {
    auto log = std::make_shared<thread_log>();
    log->tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    log->name = this_thread_name.empty() ? "thread " + std::to_string(log->tid)
                                         : this_thread_name;
    auto& st = the_state();
    std::lock_guard<std::mutex> guard{st.mtx};
    st.logs.push_back(log);
    this_thread_log = std::move(log);
  }
  return *this_thread_log;
}

void append(event e) noexcept {
  auto& st = the_state();
  try {
    auto& log = my_log();
    if (log.quota == 0) {
      if (st.spans.fetch_add(quota_batch, std::memory_order_relaxed) >=
          max_spans) {
        st.dropped.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      log.quota = quota_batch;
    }
    --log.quota;
    std::lock_guard<std::mutex> guard{log.mtx};
    if (log.blocks.empty() || log.blocks.back().size() == block_events) {
      log.blocks.emplace_back();
      log.blocks.back().reserve(block_events);
    }
    log.blocks.back().push_back(std::move(e));
  } catch (...) {
    // Out of memory: the span is lost, the traced program goes on.
    st.dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

void escape_into(std::string& out, const std::string& s) {
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
}

// The fields every event of the part shares, up to "ts".
void head_into(std::string& out, const char* ph, const std::string& name,
               const char* category, uint32_t pid, uint32_t tid) {
  if (!out.empty())
    out += ",\n";
  out += "{\"ph\":\"";
  out += ph;
  out += "\",\"name\":\"";
  escape_into(out, name);
  out += "\",\"cat\":\"";
  escape_into(out, category);
  out +=
    "\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid);
}

void flow_into(std::string& out, const char* ph, uint64_t id, uint64_t ts,
               uint32_t pid, uint32_t tid) {
  // An arrow's two ends match on name, category and id.
  head_into(out, ph, "submit", "flow", pid, tid);
  out += ",\"id\":" + std::to_string(id) + ",\"ts\":" + std::to_string(ts);
  if (ph[0] == 'f')
    out += ",\"bp\":\"e\""; // ends at the span that encloses it: the run
  out += "}";
}

std::string text_of(const span_name& n) {
  if (n.stable != nullptr)
    return n.prefix + *n.stable;
  return n.owned.empty() ? std::string{n.prefix} : n.owned;
}

void metadata_into(std::string& out, const char* what, const std::string& name,
                   uint32_t pid, uint32_t tid) {
  head_into(out, "M", what, "__metadata", pid, tid);
  out += ",\"args\":{\"name\":\"";
  escape_into(out, name);
  out += "\"}}";
}

} // namespace

namespace {

std::atomic<const simulated_timeline*> simulated{nullptr};

} // namespace

void simulate(const simulated_timeline* to) noexcept {
  simulated.store(to, std::memory_order_release);
}

uint64_t now_us() noexcept {
  if (auto* sim = simulated.load(std::memory_order_acquire))
    return sim->now_us();
  return static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now().time_since_epoch())
      .count());
}

namespace {

void record_with_args(const char* name, const char* category, uint64_t start_us,
                      const span_arg* args, int nargs,
                      uint64_t async_id) noexcept {
  if (auto* sim = simulated.load(std::memory_order_acquire)) {
    sim->span(name, category, start_us, sim->now_us(), args, nargs);
    return;
  }
  try {
    event e{{name, nullptr, {}},
            category,
            start_us,
            now_us() - start_us,
            0,
            0,
            {},
            nargs,
            async_id};
    for (int i = 0; i < nargs; ++i)
      e.args[i] = args[i];
    append(std::move(e));
  } catch (...) {
    the_state().dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

} // namespace

void record_span(const char* name, const char* category, uint64_t start_us,
                 const span_arg* args, int nargs) noexcept {
  record_with_args(name, category, start_us, args, nargs, 0);
}

void record_async_span(const char* name, const char* category,
                       uint64_t start_us, const span_arg* args,
                       int nargs) noexcept {
  record_with_args(name, category, start_us, args, nargs, new_flow());
}

void record_runtime_span(span_name name, const char* category,
                         uint64_t start_us, uint64_t flow_in,
                         uint64_t flow_out) noexcept {
  append(event{std::move(name),
               category,
               start_us,
               now_us() - start_us,
               flow_in,
               flow_out,
               {},
               0});
}

void span_opened() noexcept {
  try {
    my_log().open.fetch_add(1, std::memory_order_relaxed);
  } catch (...) {
    // No log for this thread: nothing of it to wait for either.
  }
}

void span_closed() noexcept {
  if (this_thread_log)
    this_thread_log->open.fetch_sub(1, std::memory_order_release);
}

void settle(std::chrono::milliseconds limit) {
  auto& st = the_state();
  auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int open = 0;
    {
      std::lock_guard<std::mutex> guard{st.mtx};
      for (auto& log : st.logs)
        open += log->open.load(std::memory_order_acquire);
    }
    if (open <= 0 || std::chrono::steady_clock::now() >= until)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void begin_recording() {
  auto& st = the_state();
  std::lock_guard<std::mutex> guard{st.mtx};
  if (st.users++ == 0)
    recording = true;
}

void end_recording() {
  auto& st = the_state();
  std::lock_guard<std::mutex> guard{st.mtx};
  if (st.users == 0 || --st.users > 0)
    return;
  recording = false;
  for (auto& log : st.logs) {
    std::lock_guard<std::mutex> g{log->mtx};
    log->blocks.clear();
    log->blocks.shrink_to_fit();
  }
  st.spans = 0;
  st.dropped = 0;
}

uint64_t new_flow() noexcept {
  // Arrows from other processes carry their own random base: two draws of
  // 2^59 collide with negligible odds. Below 2^60, since an id is also a
  // data-plane request's, which a typed request turns into a CAF message
  // id (with flags in its top four bits).
  static std::atomic<uint64_t> next{[] {
    std::random_device rd;
    auto base = (uint64_t{rd()} << 32) ^ rd();
    return (base >> 5) | 1;
  }()};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::string render_part(int64_t offset_us, uint32_t pid,
                        const std::string& process_name) {
  auto& st = the_state();
  std::vector<std::shared_ptr<thread_log>> logs;
  {
    std::lock_guard<std::mutex> guard{st.mtx};
    logs = st.logs;
  }
  std::string out;
  metadata_into(out, "process_name", process_name, pid, 0);
  auto at = [offset_us](uint64_t ts) {
    return static_cast<uint64_t>(static_cast<int64_t>(ts) + offset_us);
  };
  for (auto& log : logs) {
    std::lock_guard<std::mutex> guard{log->mtx};
    if (log->blocks.empty())
      continue;
    metadata_into(out, "thread_name", log->name, pid, log->tid);
    for (auto& block : log->blocks)
      for (auto& e : block) {
        auto name = text_of(e.name);
        if (e.async_id != 0) {
          // A pair of events, "b" and "e", of one id.
          head_into(out, "b", name, e.category, pid, log->tid);
          out += ",\"id\":" + std::to_string(e.async_id) +
                 ",\"ts\":" + std::to_string(at(e.start));
        } else {
          head_into(out, "X", name, e.category, pid, log->tid);
          out += ",\"ts\":" + std::to_string(at(e.start)) +
                 ",\"dur\":" + std::to_string(e.duration);
        }
        if (e.nargs > 0) {
          out += ",\"args\":{";
          for (int i = 0; i < e.nargs; ++i) {
            if (i > 0)
              out += ",";
            out += "\"";
            escape_into(out, e.args[i].key);
            out += "\":" + std::to_string(e.args[i].value);
          }
          out += "}";
        }
        out += "}";
        if (e.async_id != 0) {
          head_into(out, "e", name, e.category, pid, log->tid);
          out += ",\"id\":" + std::to_string(e.async_id) +
                 ",\"ts\":" + std::to_string(at(e.start + e.duration)) + "}";
        }
        if (e.flow_in != 0)
          flow_into(out, "f", e.flow_in, at(e.start), pid, log->tid);
        if (e.flow_out != 0)
          flow_into(out, "s", e.flow_out, at(e.start), pid, log->tid);
      }
  }
  return out;
}

size_t dropped_spans() noexcept {
  return the_state().dropped.load();
}

} // namespace detail

void name_thread(const std::string& name) {
  detail::this_thread_name = name;
  if (detail::this_thread_log) {
    auto& log = *detail::this_thread_log;
    std::lock_guard<std::mutex> guard{log.mtx};
    log.name = name;
  }
}

} // namespace lumen::trace
