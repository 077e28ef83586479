#include "trace/trace_session.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <iostream>
#include <set>

#include "lumen/detail/runtime.hpp"
#include "lumen/errors.hpp"

#include "trace/trace_log.hpp"

namespace lumen::detail {

namespace {

namespace tr = lumen::trace::detail;

enum trace_op : uint8_t {
  op_record = 1,
  op_collect = 2,
};

constexpr size_t collect_size = 1 + sizeof(int64_t) + sizeof(uint32_t);

// A node answers a clock request at once; a part may be large.
constexpr auto clock_timeout = std::chrono::seconds(2);
constexpr auto collect_timeout = std::chrono::seconds(30);
// How long a part waits for work under way to close its spans; longer
// work (a training loop in an actor) is left out of it.
constexpr auto settle_limit = std::chrono::milliseconds(200);

template <class T>
void put(bytes& out, T value) {
  auto at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

template <class T>
T take(const bytes& in, size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  return value;
}

/// This kernel's boot, as /proc says it (36 characters, or blanks): two
/// processes of one boot read one steady clock (CLOCK_MONOTONIC).
constexpr size_t boot_id_size = 36;

std::string boot_id() {
  std::string id(boot_id_size, ' ');
  std::ifstream in{"/proc/sys/kernel/random/boot_id"};
  in.read(id.data(), static_cast<std::streamsize>(id.size()));
  return in ? id : std::string(boot_id_size, ' ');
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0)
    return "?";
  return buf;
}

std::string describe_process(const std::string& name) {
  return name + " (pid " + std::to_string(::getpid()) + " on " + host_name() +
         ")";
}

/// The reply to `request`, or nothing with `why` set.
std::optional<bytes> ask(data_client& link, const bytes& request,
                         std::chrono::milliseconds timeout, std::string& why) {
  struct answer {
    bool ok = false;
    bytes payload;
    std::string why;
  };
  auto promise = std::make_shared<std::promise<answer>>();
  auto future = promise->get_future();
  bool sent = link.trace(
    request,
    [promise](reply_status s, const std::shared_ptr<bytes>& payload) {
      promise->set_value({s == reply_status::ok, *payload, {}});
    },
    [promise](const std::string& w) {
      promise->set_value({false, {}, w});
    });
  if (!sent) {
    why = "its connection is gone";
    return std::nullopt;
  }
  if (future.wait_for(timeout) != std::future_status::ready) {
    why = "it did not answer within " +
          std::to_string(
            std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
          " s";
    return std::nullopt;
  }
  auto a = future.get();
  if (!a.ok) {
    why =
      a.why.empty() ? std::string(a.payload.begin(), a.payload.end()) : a.why;
    return std::nullopt;
  }
  return std::move(a.payload);
}

} // namespace

trace_server::~trace_server() {
  if (recording_)
    tr::end_recording();
}

void trace_server::serve(const std::shared_ptr<data_connection>& c, uint64_t id,
                         const bytes& request) {
  auto refuse = [&](const std::string& why) {
    c->send(frame_kind::reply, reply_status::failed, id,
            {{why.data(), why.size()}});
  };
  if (request.size() == 1 && request[0] == op_record) {
    if (!recording_)
      tr::begin_recording();
    recording_ = true;
    bytes out;
    put<uint64_t>(out, tr::now_us());
    put<uint32_t>(out, static_cast<uint32_t>(::getpid()));
    auto boot = boot_id();
    out.insert(out.end(), boot.begin(), boot.end());
    c->send(frame_kind::reply, reply_status::ok, id, {span_of(out)});
    return;
  }
  if (request.size() == collect_size && request[0] == op_collect) {
    if (!recording_)
      return refuse("node " + this_node() + " was not asked to record");
    tr::settle(settle_limit);
    auto part = tr::render_part(take<int64_t>(request, 1),
                                take<uint32_t>(request, 1 + sizeof(int64_t)),
                                describe_process(this_node()));
    c->send(frame_kind::reply, reply_status::ok, id,
            {{part.data(), part.size()}});
    recording_ = false;
    tr::end_recording();
    return;
  }
  refuse("malformed trace request to node " + this_node());
}

trace_session::trace_session(std::string file)
  : file_(std::move(file)) {
  // Tried now, so that a bad path stops the run before it starts rather
  // than losing its timeline at the end.
  std::ofstream probe{file_, std::ios::app};
  if (!probe)
    throw usage_error("cannot write the trace file '" + file_ +
                      "': " + std::strerror(errno) +
                      "; give --trace a path in a folder you can write to");
  tr::begin_recording();
}

trace_session::~trace_session() {
  tr::end_recording();
}

void trace_session::attach(const std::vector<node_link>& nodes) {
  std::set<uint32_t> pids{static_cast<uint32_t>(::getpid())};
  for (auto& p : peers_)
    pids.insert(p.pid);
  for (auto& [node, link] : nodes) {
    // The offset from the exchange with the shortest round trip: its
    // midpoint is the closest to when the node read its clock.
    std::string why;
    uint64_t best_rtt = UINT64_MAX;
    int64_t offset = 0;
    uint32_t pid = 0;
    bool same_boot = false;
    auto our_boot = boot_id();
    constexpr size_t reply_size =
      sizeof(uint64_t) + sizeof(uint32_t) + boot_id_size;
    for (int i = 0; i < 3; ++i) {
      auto sent = tr::now_us();
      auto reply =
        ask(*link, bytes{static_cast<char>(op_record)}, clock_timeout, why);
      auto back = tr::now_us();
      if (!reply || reply->size() != reply_size)
        break;
      if (back - sent < best_rtt) {
        best_rtt = back - sent;
        auto theirs = take<uint64_t>(*reply, 0);
        offset = static_cast<int64_t>(sent + (back - sent) / 2) -
                 static_cast<int64_t>(theirs);
        pid = take<uint32_t>(*reply, sizeof(uint64_t));
        auto at = reply->begin() + sizeof(uint64_t) + sizeof(uint32_t);
        same_boot = std::string(at, at + boot_id_size) == our_boot &&
                    our_boot != std::string(boot_id_size, ' ');
      }
    }
    if (best_rtt == UINT64_MAX) {
      missing_.push_back(node + " (" + (why.empty() ? "bad reply" : why) + ")");
      continue;
    }
    // A node of this machine's boot reads the same clock: its offset is 0,
    // which the midpoint estimate only approaches within half a round trip
    // (enough to put a node's call past the end of the driver's span that
    // waited for it). Unless the clocks disagree past that bound (a time
    // namespace), 0 it is.
    if (same_boot && std::llabs(offset) <= static_cast<int64_t>(best_rtt))
      offset = 0;
    // Processes on two hosts may share a pid; the file needs one per row.
    while (!pids.insert(pid).second)
      pid = pid < (1u << 22) ? (1u << 22) : pid + 1;
    peers_.push_back({node, link, offset, pid});
  }
}

void trace_session::finish(const std::string& process_name) {
  std::vector<std::string> parts;
  for (auto& p : peers_) {
    bytes request{static_cast<char>(op_collect)};
    put<int64_t>(request, p.offset_us);
    put<uint32_t>(request, p.pid);
    std::string why;
    auto part = ask(*p.link, request, collect_timeout, why);
    if (!part) {
      missing_.push_back(p.node + " (" + why + ")");
      continue;
    }
    parts.emplace_back(part->begin(), part->end());
  }
  tr::settle(settle_limit);
  parts.push_back(tr::render_part(0, static_cast<uint32_t>(::getpid()),
                                  describe_process(process_name)));
  std::ofstream out{file_, std::ios::trunc};
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  for (auto& part : parts) {
    if (part.empty())
      continue;
    if (!first)
      out << ",\n";
    out << part;
    first = false;
  }
  out << "\n]}\n";
  out.close();
  if (!out) {
    std::cerr << "lumen: could not write the trace to '" << file_
              << "': " << std::strerror(errno) << "\n";
    return;
  }
  std::cerr << "lumen: wrote the timeline of " << parts.size()
            << (parts.size() == 1 ? " process" : " processes") << " to "
            << file_
            << " (open it at https://ui.perfetto.dev or chrome://tracing)\n";
  for (auto& m : missing_)
    std::cerr << "lumen: the timeline lacks the part of " << m << "\n";
  if (auto dropped = tr::dropped_spans())
    std::cerr << "lumen: the timeline dropped " << dropped
              << " spans of this process past its bound\n";
}

} // namespace lumen::detail
