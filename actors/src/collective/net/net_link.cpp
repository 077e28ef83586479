#include "collective/net/net_link.hpp"

#include <algorithm>

namespace lumen::collective::detail {

namespace {

/// Messages up to here leave from the op thread when the writer is idle.
constexpr size_t inline_limit = 64 * 1024;

} // namespace

net_links::net_links(std::string group, int world, int rank,
                     std::vector<lumen::channel> peers,
                     std::chrono::milliseconds timeout)
  : group_(std::move(group))
  , world_(world)
  , rank_(rank)
  , peers_(std::move(peers))
  , readers_(peers_.size())
  , timeout_(timeout)
  , dead_(peers_.size(), false) {
  for (auto& c : peers_)
    c.set_timeout(timeout_);
  writer_ = std::thread{[this] { write_loop(); }};
}

net_links::~net_links() {
  {
    std::unique_lock<std::mutex> lock{mtx_};
    // What the member's last operation queued (its descriptors, say) goes
    // out before the news that it left.
    done_cv_.wait_for(lock, timeout_,
                      [this] { return sent_ >= posted_ || !broken_.empty(); });
    if (break_locked("group '" + group_ + "': rank " + std::to_string(rank_) +
                       " left the group (destroy_group, or its thread or "
                       "process ended); make the group again to go on",
                     errc::peer_lost))
      done_cv_.wait_for(lock, abort_grace, [this] { return aborts_out_; });
    stopping_ = true;
    work_cv_.notify_all();
  }
  writer_.join();
  // The writer ended this end's sending after the aborts. Until the peers
  // end theirs, what was sent may still be on its way (through a TLS
  // relay of this process, which dies with it): wait for them a while.
  auto deadline = std::chrono::steady_clock::now() + abort_grace;
  std::vector<char> skip(64 * 1024);
  for (auto& c : peers_) {
    if (!c)
      continue;
    try {
      for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0)
          break;
        c.set_timeout(left);
        c.recv_some(skip.data(), skip.size());
      }
    } catch (const lumen::error&) {
      // The peer ended too (or went quiet): nothing more to wait for.
    }
  }
  close_all();
}

void net_links::set_timeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> guard{mtx_};
  timeout_ = timeout;
  for (auto& c : peers_)
    c.set_timeout(timeout);
}

uint64_t net_links::post(int peer, frame_kind kind, const void* data,
                         size_t n) {
  job j;
  j.peer = peer;
  j.second = {frame_magic, static_cast<uint32_t>(kind), n};
  j.data = data;
  j.n = n;
  j.has_second = true;
  return push(std::move(j));
}

void net_links::post_copy(int peer, frame_kind kind, const void* bytes,
                          size_t n) {
  job j;
  j.peer = peer;
  j.first = {frame_magic, static_cast<uint32_t>(kind), n};
  j.owned.assign(static_cast<const char*>(bytes), n);
  j.has_first = true;
  push(std::move(j));
}

uint64_t net_links::post_head_and_data(int peer, frame_kind kind,
                                       const void* head, size_t head_n,
                                       const void* data, size_t n) {
  job j;
  j.peer = peer;
  j.first = {frame_magic, static_cast<uint32_t>(kind), head_n};
  j.owned.assign(static_cast<const char*>(head), head_n);
  j.has_first = true;
  j.second = {frame_magic, static_cast<uint32_t>(frame_kind::data), n};
  j.data = data;
  j.n = n;
  j.has_second = n > 0;
  return push(std::move(j));
}

uint64_t net_links::push(job j) {
  check_lost();
  std::unique_lock<std::mutex> lock{mtx_};
  if (!broken_.empty()) {
    lock.unlock();
    fail(broken_);
  }
  // No bytes, no frame: a reader of no bytes reads nothing.
  if (!j.has_first && j.n == 0)
    return posted_;
  j.ticket = ++posted_;
  auto peer = static_cast<size_t>(j.peer);
  if (queue_.empty() && !writing_ && !dead_[peer] && j.n <= inline_limit) {
    // A small message goes out from this thread, sparing the wake-up of
    // the writer; what the socket does not take at once, the writer sends.
    writing_ = true;
    lock.unlock();
    auto how = write_job(j, true);
    lock.lock();
    writing_ = false;
    if (how != written::ok || j.done == frame_bytes(j)) {
      finish_locked(j, how);
      return j.ticket;
    }
    queue_.push_front(std::move(j));
    work_cv_.notify_all();
    return posted_;
  }
  queue_.push_back(std::move(j));
  work_cv_.notify_all();
  return posted_;
}

void net_links::wait_sent(uint64_t ticket) {
  {
    std::unique_lock<std::mutex> lock{mtx_};
    done_cv_.wait(lock, [&] {
      return sent_ >= ticket || !broken_.empty() || lost_peer_ >= 0;
    });
    if (!broken_.empty()) {
      lock.unlock();
      fail(broken_);
    }
  }
  check_lost();
}

void net_links::flush() {
  uint64_t last;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    last = posted_;
  }
  wait_sent(last);
}

size_t net_links::frame_bytes(const job& j) noexcept {
  return (j.raw ? j.owned.size() : 0) +
         (j.has_first ? sizeof(frame_header) + j.owned.size() : 0) +
         (j.has_second ? sizeof(frame_header) + j.n : 0);
}

net_links::written net_links::write_job(job& j, bool dont_wait) {
  iovec parts[4];
  int count = 0;
  if (j.raw)
    parts[count++] = {j.owned.data(), j.owned.size()};
  if (j.has_first) {
    parts[count++] = {&j.first, sizeof(j.first)};
    parts[count++] = {j.owned.data(), j.owned.size()};
  }
  if (j.has_second) {
    parts[count++] = {&j.second, sizeof(j.second)};
    parts[count++] = {const_cast<void*>(j.data), j.n};
  }
  // Skip what went out already.
  int first = 0;
  for (size_t skip = j.done; first < count && skip >= parts[first].iov_len;
       ++first)
    skip -= parts[first].iov_len;
  if (first < count) {
    size_t before = 0;
    for (int i = 0; i < first; ++i)
      before += parts[i].iov_len;
    auto into = j.done - before;
    parts[first].iov_base = static_cast<char*>(parts[first].iov_base) + into;
    parts[first].iov_len -= into;
  }
  auto& c = peers_[static_cast<size_t>(j.peer)];
  try {
    if (dont_wait)
      j.done += c.send_some(parts + first, count - first);
    else {
      c.send(parts + first, count - first);
      j.done = frame_bytes(j);
    }
  } catch (const lumen::error& e) {
    return e.code() == lumen::errc::timeout ? written::timed_out
                                            : written::gone;
  }
  return written::ok;
}

void net_links::finish_locked(const job& j, written how) {
  bool ok = how == written::ok;
  if (!ok)
    dead_[static_cast<size_t>(j.peer)] = true;
  if (j.is_abort()) {
    if (std::none_of(queue_.begin(), queue_.end(),
                     [](const job& q) { return q.is_abort(); }))
      aborts_out_ = true;
  } else {
    sent_ = std::max(sent_, j.ticket);
    if (ok)
      traffic_.sent += j.n;
    // Why the peer closed is for the op thread to find out: it may have
    // left an abort with the first cause on its way out.
    if (!ok && lost_peer_ < 0) {
      lost_peer_ = j.peer;
      lost_timed_out_ = how == written::timed_out;
    }
  }
  done_cv_.notify_all();
  if (!queue_.empty())
    work_cv_.notify_all(); // queued while an op-thread write was under way
}

void net_links::write_loop() {
  std::unique_lock<std::mutex> lock{mtx_};
  for (;;) {
    work_cv_.wait(
      lock, [this] { return stopping_ || (!queue_.empty() && !writing_); });
    if (queue_.empty())
      return;
    auto j = std::move(queue_.front());
    queue_.pop_front();
    auto how = dead_[static_cast<size_t>(j.peer)] ? written::gone : written::ok;
    writing_ = true;
    lock.unlock();
    if (how == written::ok)
      how = write_job(j, false);
    lock.lock();
    writing_ = false;
    finish_locked(j, how);
    if (aborts_out_ && j.is_abort()) {
      // The peers read the aborts, then the end of the stream.
      for (auto& c : peers_)
        c.shutdown_send();
    }
  }
}

bool net_links::break_locked(const std::string& why, errc code) {
  if (!broken_.empty())
    return false;
  broken_ = {why, code};
  broken_at_ = std::chrono::steady_clock::now();
  auto payload = static_cast<char>(code) + why;
  // Data not sent yet never will be: whoever waits for it wakes to the
  // failure. The aborts go next, one to every peer.
  queue_.clear();
  sent_ = posted_;
  if (cut_peer_ >= 0 && cut_left_ > 0) {
    job pad;
    pad.peer = cut_peer_;
    pad.raw = true;
    pad.owned.assign(cut_left_, '\0');
    queue_.push_back(std::move(pad));
  }
  for (int p = 0; p < world_; ++p)
    if (p != rank_) {
      job j;
      j.peer = p;
      j.first = {frame_magic, static_cast<uint32_t>(frame_kind::abort),
                 payload.size()};
      j.owned = payload;
      j.has_first = true;
      queue_.push_back(std::move(j));
    }
  if (queue_.empty())
    aborts_out_ = true;
  work_cv_.notify_all();
  done_cv_.notify_all();
  return true;
}

void net_links::close_all() noexcept {
  for (auto& c : peers_)
    c.shutdown();
}

void net_links::on_stall(stall_report stall,
                         std::shared_ptr<flight_recorder> recorder) {
  stall_ = std::move(stall);
  recorder_ = std::move(recorder);
}

void net_links::fail(const std::string& why, errc code, bool relayed) {
  auto text = why;
  // The member that found a stall first says where everyone is; the
  // others relay its words.
  if (!relayed && stall_ &&
      (code == errc::timeout || code == errc::peer_lost) && broken().empty())
    text += stall_(why, gone_);
  if (text.size() >= max_reason)
    text.resize(max_reason - 1); // the peers take no longer abort
  link_failure cause;
  {
    std::unique_lock<std::mutex> lock{mtx_};
    if (break_locked(text, code))
      done_cv_.wait_for(lock, abort_grace, [this] { return aborts_out_; });
    cause = broken_;
  }
  close_all();
  throw collective_error(cause.why, cause.code);
}

link_failure net_links::broken() {
  std::lock_guard<std::mutex> guard{mtx_};
  return broken_;
}

std::optional<std::chrono::steady_clock::time_point> net_links::broken_at() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (broken_.empty())
    return std::nullopt;
  return broken_at_;
}

link_traffic net_links::traffic() {
  std::lock_guard<std::mutex> guard{mtx_};
  auto t = traffic_;
  t.received = received_;
  return t;
}

} // namespace lumen::collective::detail
