#pragma once

/// Spans of your own in a run's timeline (`--trace FILE`, see
/// lumen::init_options::trace_file): the runtime already records each task
/// and actor method call; a span names a step inside one, as the ML layer
/// names its ring steps and parameter-server rounds.
///
///     void train_step() {
///       lumen::trace::span s{"backward", "train"};
///       s.arg("batch", batch_index);
///       ...
///     }
///
/// With tracing off a span costs one relaxed atomic load.

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

namespace lumen::trace {

namespace detail {

extern std::atomic<bool> recording;

/// Microseconds on this process's trace clock.
uint64_t now_us() noexcept;

struct span_arg {
  const char* key;
  int64_t value;
};

void record_span(const char* name, const char* category, uint64_t start_us,
                 const span_arg* args, int nargs) noexcept;

void record_async_span(const char* name, const char* category,
                       uint64_t start_us, const span_arg* args,
                       int nargs) noexcept;

} // namespace detail

/// Whether this process is recording a timeline now: a driver started with
/// a trace file, or a node while a tracing driver works with it.
inline bool enabled() noexcept {
  return detail::recording.load(std::memory_order_relaxed);
}

/// A span on the calling thread's row, from construction to destruction.
/// `name` and `category` must outlive it (string literals do); a span begun
/// while tracing was off records nothing.
class span {
public:
  explicit span(const char* name, const char* category = "user") noexcept
    : name_(name)
    , category_(category)
    , start_(enabled() ? detail::now_us() + 1 : 0) {}

  ~span() {
    if (start_ != 0)
      detail::record_span(name_, category_, start_ - 1, args_, nargs_);
  }

  span(const span&) = delete;
  span& operator=(const span&) = delete;

  /// Shows `key: value` with the span in the viewer; `key` must outlive
  /// the span. The first four are kept.
  span& arg(const char* key, int64_t value) noexcept {
    if (start_ != 0 && nargs_ < max_args)
      args_[nargs_++] = {key, value};
    return *this;
  }

private:
  static constexpr int max_args = 4;
  const char* name_;
  const char* category_;
  uint64_t start_; // now_us() + 1 when recording, else 0
  detail::span_arg args_[max_args] = {};
  int nargs_ = 0;
};

/// A span that overlaps others on its thread or ends on another thread (an
/// operation in flight, such as a bucket's all-reduce during backward):
/// shown on a track of its own, beside the thread rows. It ends at `end()`
/// or destruction; a default-constructed one records nothing.
class async_span {
public:
  async_span() noexcept = default;

  async_span(const char* name, const char* category) noexcept
    : name_(name)
    , category_(category)
    , start_(enabled() ? detail::now_us() + 1 : 0) {}

  async_span(async_span&& other) noexcept {
    *this = std::move(other);
  }

  async_span& operator=(async_span&& other) noexcept {
    if (this != &other) {
      end();
      name_ = other.name_;
      category_ = other.category_;
      start_ = other.start_;
      nargs_ = other.nargs_;
      for (int i = 0; i < nargs_; ++i)
        args_[i] = other.args_[i];
      other.start_ = 0;
    }
    return *this;
  }

  ~async_span() {
    end();
  }

  void end() noexcept {
    if (start_ != 0)
      detail::record_async_span(name_, category_, start_ - 1, args_, nargs_);
    start_ = 0;
  }

  /// As span::arg.
  async_span& arg(const char* key, int64_t value) noexcept {
    if (start_ != 0 && nargs_ < max_args)
      args_[nargs_++] = {key, value};
    return *this;
  }

private:
  static constexpr int max_args = 4;
  const char* name_ = "";
  const char* category_ = "";
  uint64_t start_ = 0; // as span's
  detail::span_arg args_[max_args] = {};
  int nargs_ = 0;
};

/// Names the calling thread's row in the timeline ("loader", "worker 3");
/// rows are otherwise "thread N". The runtime names its own threads.
void name_thread(const std::string& name);

} // namespace lumen::trace
