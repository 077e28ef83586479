#include "collective/recorder.hpp"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "collective/transport.hpp"

namespace lumen::collective::detail {

int64_t unix_us() noexcept {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0)
    return "unknown";
  return name;
}

namespace {

int64_t coarse_unix_us() noexcept {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &t);
  return int64_t{t.tv_sec} * 1000000 + t.tv_nsec / 1000;
}

size_t capacity_from_env() {
  auto* text = std::getenv("LUMEN_FLIGHT_RECORDER");
  if (text == nullptr || *text == '\0')
    return 64;
  char* end = nullptr;
  auto n = std::strtoull(text, &end, 10);
  if (*end != '\0' || n > 1'000'000) {
    std::cerr << "lumen: LUMEN_FLIGHT_RECORDER='" << text
              << "' is not a number of operations from 0 to 1000000; "
                 "keeping the default, 64\n";
    return 64;
  }
  return static_cast<size_t>(n);
}

/// The process's members and settings. Never destroyed: the SIGUSR1
/// thread and members ending at exit may still use it.
struct records_registry {
  std::mutex mtx;
  std::vector<std::weak_ptr<flight_recorder>> members;
  std::atomic<size_t> capacity{capacity_from_env()};
  std::string dir; // set_flight_records_dir
};

records_registry& the_registry() {
  static auto* r = new records_registry;
  return *r;
}

std::string site_text(const call_site& site) {
  char text[48];
  call_site_text(site, text);
  return text;
}

nlohmann::json record_json(const op_record& r) {
  nlohmann::json j{{"seq", r.seq},
                   {"op", r.what},
                   {"site", site_text(r.site)},
                   {"bytes", r.bytes},
                   {"start_unix_us", r.start_us}};
  if (r.end_us == 0) {
    j["end_unix_us"] = nullptr;
    j["state"] = "running";
  } else {
    j["end_unix_us"] = r.end_us;
    j["state"] = r.failed ? "failed" : "done";
  }
  return j;
}

// SIGUSR1 writes every member's records: the handler only wakes a thread
// (a write to a pipe is all a handler may safely do).
int signal_pipe[2] = {-1, -1};

void on_sigusr1(int) {
  auto saved = errno;
  char one = 1;
  [[maybe_unused]] auto n = ::write(signal_pipe[1], &one, 1);
  errno = saved;
}

void write_on_signal() {
  for (;;) {
    char one;
    auto n = ::read(signal_pipe[0], &one, 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    try {
      auto doc = process_records("");
      doc["why"] = "SIGUSR1";
      auto path = write_records_file(
        "flight-pid" + std::to_string(::getpid()) + ".json", doc);
      std::cerr << "lumen: flight records of " << doc["members"].size()
                << " collective member(s) written to " << path << "\n";
    } catch (const std::exception& e) {
      std::cerr << "lumen: SIGUSR1: could not write the flight records: "
                << e.what() << "\n";
    }
  }
}

/// Takes SIGUSR1 unless the program has a handler of its own for it.
void listen_for_sigusr1() {
  struct sigaction now {};
  if (::sigaction(SIGUSR1, nullptr, &now) != 0 || now.sa_handler != SIG_DFL)
    return;
  if (::pipe(signal_pipe) != 0)
    return;
  std::thread{write_on_signal}.detach();
  struct sigaction with {};
  with.sa_handler = on_sigusr1;
  sigemptyset(&with.sa_mask);
  with.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &with, nullptr);
}

} // namespace

flight_recorder::flight_recorder(std::string group, int rank, int world,
                                 const char* backend, size_t capacity)
  : group_(std::move(group))
  , rank_(rank)
  , world_(world)
  , backend_(backend)
  , ring_(capacity)
  , joined_us_(unix_us()) {}

namespace {

/// Writes `place` under its seqlock: `write` stores the fields.
template <class Write>
void rewrite(record_place& place, Write write) noexcept {
  auto v = place.version.load(std::memory_order_relaxed);
  place.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  write();
  place.version.store(v + 2, std::memory_order_release);
}

/// A consistent copy of `place`, or nothing if it kept changing.
std::optional<op_record> read_place(const record_place& place) {
  for (int tries = 0; tries < 100; ++tries) {
    auto before = place.version.load(std::memory_order_acquire);
    if (before % 2 == 1)
      continue;
    op_record r;
    r.seq = place.seq.load(std::memory_order_relaxed);
    r.what = place.what.load(std::memory_order_relaxed);
    r.site = {place.file.load(std::memory_order_relaxed),
              place.line.load(std::memory_order_relaxed)};
    r.bytes = place.bytes.load(std::memory_order_relaxed);
    r.start_us = place.start_us.load(std::memory_order_relaxed);
    r.end_us = place.end_us.load(std::memory_order_relaxed);
    r.failed = place.failed.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (place.version.load(std::memory_order_relaxed) == before)
      return r;
  }
  return std::nullopt;
}

} // namespace

void flight_recorder::begin(const char* what, uint64_t seq,
                            const call_site& site, uint64_t bytes) noexcept {
  if (ring_.empty())
    return;
  auto now = coarse_unix_us();
  auto& p = ring_[seq % ring_.size()];
  rewrite(p, [&] {
    constexpr auto relaxed = std::memory_order_relaxed;
    p.seq.store(seq, relaxed);
    p.what.store(what, relaxed);
    p.file.store(site.file, relaxed);
    p.line.store(site.line, relaxed);
    p.bytes.store(bytes, relaxed);
    p.start_us.store(now, relaxed);
    p.end_us.store(0, relaxed);
    p.failed.store(false, relaxed);
  });
  if (seq > last_seq_.load(std::memory_order_relaxed))
    last_seq_.store(seq, std::memory_order_relaxed);
}

void flight_recorder::end(uint64_t seq, bool failed) noexcept {
  if (ring_.empty())
    return;
  auto& p = ring_[seq % ring_.size()];
  // Overwritten (more operations started since than are kept), or ended
  // already (a started all-reduce tested again).
  if (p.seq.load(std::memory_order_relaxed) != seq ||
      p.end_us.load(std::memory_order_relaxed) != 0)
    return;
  // At least a microsecond, so that an operation within one clock tick
  // still reads as ended.
  auto now =
    std::max(coarse_unix_us(), p.start_us.load(std::memory_order_relaxed) + 1);
  rewrite(p, [&] {
    p.end_us.store(now, std::memory_order_relaxed);
    p.failed.store(failed, std::memory_order_relaxed);
  });
}

nlohmann::json flight_recorder::to_json() const {
  std::vector<op_record> kept;
  for (auto& p : ring_)
    if (auto r = read_place(p); r && r->seq > 0)
      kept.push_back(*r);
  auto last = last_seq_.load(std::memory_order_relaxed);
  std::sort(kept.begin(), kept.end(),
            [](auto& a, auto& b) { return a.seq < b.seq; });
  auto now = unix_us();
  nlohmann::json running = nlohmann::json::array();
  nlohmann::json records = nlohmann::json::array();
  const op_record* done = nullptr;
  int64_t since = joined_us_;
  int64_t oldest_running = 0;
  for (auto& r : kept) {
    records.push_back(record_json(r));
    if (r.end_us == 0) {
      running.push_back(record_json(r));
      if (oldest_running == 0)
        oldest_running = r.start_us;
    } else {
      done = &r;
      since = std::max(since, r.end_us);
    }
  }
  bool inside = !running.empty();
  auto waiting = waiting_for_.load(std::memory_order_relaxed);
  nlohmann::json j{
    {"group", group_},
    {"rank", rank_},
    {"world", world_},
    {"backend", backend_},
    {"operations", last},
    // "failed": its last operation ended in an error (it left the
    // collective with the others' failure, or its own).
    {"state", inside                 ? "in_collective"
              : done && done->failed ? "failed"
                                     : "outside"},
    {"for_s", double(now - (inside ? oldest_running : since)) / 1e6},
    {"current", running},
    {"waiting_for", inside && waiting >= 0 ? nlohmann::json(waiting)
                                           : nlohmann::json(nullptr)},
    {"last_completed", done ? record_json(*done) : nlohmann::json(nullptr)},
    {"records", records}};
  return j;
}

std::shared_ptr<flight_recorder> make_recorder(const std::string& group,
                                               int rank, int world,
                                               const char* backend) {
  static std::once_flag signal_once;
  std::call_once(signal_once, listen_for_sigusr1);
  auto& reg = the_registry();
  auto capacity = reg.capacity.load();
  if (capacity == 0)
    return nullptr;
  auto r =
    std::make_shared<flight_recorder>(group, rank, world, backend, capacity);
  std::lock_guard<std::mutex> guard{reg.mtx};
  reg.members.erase(std::remove_if(reg.members.begin(), reg.members.end(),
                                   [](auto& w) { return w.expired(); }),
                    reg.members.end());
  reg.members.push_back(r);
  return r;
}

nlohmann::json member_records(const flight_recorder& r) {
  auto m = r.to_json();
  m["host"] = host_name();
  m["pid"] = static_cast<int64_t>(::getpid());
  return m;
}

nlohmann::json process_records(const std::string& group) {
  std::vector<std::shared_ptr<flight_recorder>> live;
  {
    auto& reg = the_registry();
    std::lock_guard<std::mutex> guard{reg.mtx};
    for (auto& w : reg.members)
      if (auto r = w.lock(); r && (group.empty() || r->group() == group))
        live.push_back(std::move(r));
  }
  nlohmann::json members = nlohmann::json::array();
  for (auto& r : live)
    members.push_back(member_records(*r));
  return {{"host", host_name()},
          {"pid", static_cast<int64_t>(::getpid())},
          {"written_unix_us", unix_us()},
          {"members", members}};
}

std::string records_dir() {
  {
    auto& reg = the_registry();
    std::lock_guard<std::mutex> guard{reg.mtx};
    if (!reg.dir.empty())
      return reg.dir;
  }
  if (auto* env = std::getenv("LUMEN_FLIGHT_RECORDS"); env && *env)
    return env;
  auto* home = std::getenv("HOME");
  return std::string{home && *home ? home : "/tmp"} + "/.lumen/flight";
}

std::string write_records_file(const std::string& name,
                               const nlohmann::json& doc) {
  namespace fs = std::filesystem;
  fs::path dir = records_dir();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw std::runtime_error("cannot make the folder " + dir.string() + ": " +
                             ec.message() +
                             "; set another with LUMEN_FLIGHT_RECORDS");
  auto path = dir / name;
  // Unique to this writer: members of one process write at once too.
  static std::atomic<uint64_t> writes{0};
  auto tmp = path;
  tmp += ".tmp" + std::to_string(::getpid()) + "." + std::to_string(++writes);
  {
    std::ofstream out{tmp};
    out << doc.dump(1) << "\n";
    if (!out)
      throw std::runtime_error("cannot write " + tmp.string() +
                               "; set another folder with "
                               "LUMEN_FLIGHT_RECORDS");
  }
  fs::rename(tmp, path, ec);
  if (ec)
    throw std::runtime_error("cannot rename " + tmp.string() + ": " +
                             ec.message());
  return path.string();
}

} // namespace lumen::collective::detail

namespace lumen::collective {

void set_flight_recorder(size_t operations) {
  detail::the_registry().capacity.store(operations);
}

void set_flight_records_dir(const std::string& dir) {
  auto& reg = detail::the_registry();
  std::lock_guard<std::mutex> guard{reg.mtx};
  reg.dir = dir;
}

std::string write_flight_records(const std::string& why) {
  auto doc = detail::process_records("");
  doc["why"] = why;
  return detail::write_records_file(
    "flight-pid" + std::to_string(::getpid()) + ".json", doc);
}

} // namespace lumen::collective
