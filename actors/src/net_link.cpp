#include "net_link.hpp"

#include <algorithm>

namespace lumen::collective::detail {

namespace {

/// Longer frames are not ours: data goes in segments far below this, an
/// abort's reason is a sentence.
constexpr uint64_t max_frame = uint64_t{1} << 30;
constexpr uint64_t max_reason = 4096;

/// How long a failing member gives its aborts to leave before it closes
/// its channels regardless (a peer that does not read must not hold it).
constexpr auto abort_grace = std::chrono::milliseconds(500);

} // namespace

const char* to_string(operation_kind k) noexcept {
  switch (k) {
    case operation_kind::allreduce:
      return "allreduce";
    case operation_kind::reduce:
      return "reduce";
    case operation_kind::broadcast:
      return "broadcast";
    case operation_kind::allgather:
      return "allgather";
    case operation_kind::reducescatter:
      return "reducescatter";
    case operation_kind::barrier:
      return "barrier";
    case operation_kind::send:
      return "send/recv";
  }
  return "an unknown operation";
}

net_links::net_links(std::string group, int world, int rank,
                     std::vector<lumen::channel> peers,
                     std::chrono::milliseconds timeout)
  : group_(std::move(group))
  , world_(world)
  , rank_(rank)
  , peers_(std::move(peers))
  , readers_(peers_.size())
  , timeout_(timeout) {
  for (auto& c : peers_)
    c.set_timeout(timeout_);
  writer_ = std::thread{[this] { write_loop(); }};
}

net_links::~net_links() {
  {
    std::unique_lock<std::mutex> lock{mtx_};
    // What the member's last operation queued (its descriptors, say) goes
    // out before the news that it left.
    cv_.wait_for(lock, timeout_,
                 [this] { return sent_ >= posted_ || !broken_.empty(); });
    if (break_locked("group '" + group_ + "': rank " + std::to_string(rank_) +
                     " left the group (destroy_group, or its thread or "
                     "process ended); make the group again to go on"))
      cv_.wait_for(lock, abort_grace, [this] { return aborts_out_; });
    stopping_ = true;
    cv_.notify_all();
  }
  close_all();
  writer_.join();
}

void net_links::set_timeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> guard{mtx_};
  timeout_ = timeout;
  for (auto& c : peers_)
    c.set_timeout(timeout);
}

uint64_t net_links::post(int peer, frame_kind kind, const void* data,
                         size_t n) {
  return push(
    {peer, {frame_magic, static_cast<uint32_t>(kind), n}, data, n, {}, 0});
}

void net_links::post_copy(int peer, frame_kind kind, const void* bytes,
                          size_t n) {
  push({peer,
        {frame_magic, static_cast<uint32_t>(kind), n},
        nullptr,
        n,
        std::string(static_cast<const char*>(bytes), n),
        0});
}

uint64_t net_links::push(job j) {
  check_lost();
  std::unique_lock<std::mutex> lock{mtx_};
  if (!broken_.empty()) {
    lock.unlock();
    fail(broken_);
  }
  // No bytes, no frame: a reader of no bytes reads nothing.
  if (j.n == 0 && j.header.kind == static_cast<uint32_t>(frame_kind::data))
    return posted_;
  j.ticket = ++posted_;
  queue_.push_back(std::move(j));
  cv_.notify_all();
  return posted_;
}

void net_links::wait_sent(uint64_t ticket) {
  {
    std::unique_lock<std::mutex> lock{mtx_};
    cv_.wait(lock, [&] {
      return sent_ >= ticket || !broken_.empty() || lost_peer_ >= 0;
    });
    if (!broken_.empty()) {
      lock.unlock();
      fail(broken_);
    }
  }
  check_lost();
}

void net_links::check_lost() {
  int peer;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (lost_peer_ < 0 || !broken_.empty())
      return;
    peer = lost_peer_;
  }
  fail(last_words(peer));
}

std::string net_links::last_words(int peer) {
  // What the peer sent before it closed is still here to read: skip its
  // frames up to an abort, if it left one.
  auto& c = peers_[static_cast<size_t>(peer)];
  c.set_timeout(abort_grace);
  std::vector<char> skip(64 * 1024);
  try {
    for (;;) {
      frame_header h{};
      c.recv(&h, sizeof(h));
      if (h.magic != frame_magic || h.length > max_frame)
        break;
      if (h.kind == static_cast<uint32_t>(frame_kind::abort) &&
          h.length <= max_reason) {
        std::string why(h.length, '\0');
        c.recv(why.data(), why.size());
        return why;
      }
      for (uint64_t left = h.length; left > 0;) {
        auto k = static_cast<size_t>(std::min<uint64_t>(left, skip.size()));
        c.recv(skip.data(), k);
        left -= k;
      }
    }
  } catch (const lumen::channel_error&) {
    // Closed without a word: the process is gone.
  }
  return "group '" + group_ + "': rank " + std::to_string(peer) +
         " is gone (its process died, or it left the group); rank " +
         std::to_string(rank_) + " could not send to it";
}

void net_links::flush() {
  uint64_t last;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    last = posted_;
  }
  wait_sent(last);
}

void net_links::write_loop() {
  std::unique_lock<std::mutex> lock{mtx_};
  std::vector<bool> dead(peers_.size(), false);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty())
      return;
    auto j = std::move(queue_.front());
    queue_.pop_front();
    bool abort = j.header.kind == static_cast<uint32_t>(frame_kind::abort);
    auto& c = peers_[static_cast<size_t>(j.peer)];
    lock.unlock();
    bool ok = !dead[static_cast<size_t>(j.peer)];
    if (ok) {
      const void* payload = j.data != nullptr ? j.data : j.owned.data();
      iovec parts[2] = {{&j.header, sizeof(j.header)},
                        {const_cast<void*>(payload), j.n}};
      try {
        c.send(parts, j.n > 0 ? 2 : 1);
      } catch (const lumen::error&) {
        ok = false;
        dead[static_cast<size_t>(j.peer)] = true;
      }
    }
    lock.lock();
    if (abort) {
      if (queue_.empty()) {
        aborts_out_ = true;
        lock.unlock();
        close_all();
        lock.lock();
      }
    } else {
      sent_ = std::max(sent_, j.ticket);
      if (ok && j.header.kind == static_cast<uint32_t>(frame_kind::data))
        traffic_.sent += j.n;
      // Why the peer closed is for the op thread to find out: it may have
      // left an abort with the first cause on its way out.
      if (!ok && lost_peer_ < 0)
        lost_peer_ = j.peer;
    }
    cv_.notify_all();
  }
}

bool net_links::break_locked(const std::string& why) {
  if (!broken_.empty())
    return false;
  broken_ = why;
  // Data not sent yet never will be: whoever waits for it wakes to the
  // failure. The aborts go next, one to every peer.
  queue_.clear();
  sent_ = posted_;
  for (int p = 0; p < world_; ++p)
    if (p != rank_)
      queue_.push_back(
        {p,
         {frame_magic, static_cast<uint32_t>(frame_kind::abort), why.size()},
         nullptr,
         why.size(),
         why,
         0});
  if (queue_.empty())
    aborts_out_ = true;
  cv_.notify_all();
  return true;
}

void net_links::close_all() noexcept {
  for (auto& c : peers_)
    c.shutdown();
}

void net_links::fail(const std::string& why) {
  std::string cause;
  {
    std::unique_lock<std::mutex> lock{mtx_};
    if (break_locked(why))
      cv_.wait_for(lock, abort_grace, [this] { return aborts_out_; });
    cause = broken_;
  }
  close_all();
  throw collective_error(cause);
}

std::string net_links::broken() {
  std::lock_guard<std::mutex> guard{mtx_};
  return broken_;
}

link_traffic net_links::traffic() {
  std::lock_guard<std::mutex> guard{mtx_};
  auto t = traffic_;
  t.received = received_;
  return t;
}

void net_links::lost(int peer, const char* doing, bool timed_out) {
  auto cause = broken();
  if (!cause.empty())
    fail(cause); // this member closed its own channels
  check_lost();
  auto who = "rank " + std::to_string(peer);
  if (timed_out)
    fail("group '" + group_ + "': rank " + std::to_string(rank_) + " waited " +
         std::to_string(timeout_.count()) + " ms for " + who + " during " +
         doing + ", which sent nothing; is it calling the same collective?");
  fail("group '" + group_ + "': " + who +
       " is gone (its process died, or it left the group) during " + doing +
       "; rank " + std::to_string(rank_) + " lost its link to it");
}

frame_header net_links::read_header(int peer, const char* doing) {
  frame_header h{};
  auto& c = peers_[static_cast<size_t>(peer)];
  try {
    c.recv(&h, sizeof(h));
  } catch (const lumen::channel_error& e) {
    lost(peer, doing, e.code() == lumen::errc::timeout);
  }
  auto junk = [&] {
    fail("group '" + group_ + "': rank " + std::to_string(peer) +
         " sent bytes that are not a collective's frame; do all members run "
         "the same Lumen version?");
  };
  if (h.magic != frame_magic || h.length > max_frame)
    junk();
  if (h.kind == static_cast<uint32_t>(frame_kind::abort)) {
    if (h.length > max_reason)
      junk();
    std::string why(h.length, '\0');
    try {
      c.recv(why.data(), why.size());
    } catch (const lumen::channel_error&) {
      why = "group '" + group_ + "': rank " + std::to_string(peer) +
            " broke the group and left";
    }
    fail(why);
  }
  if (h.kind != static_cast<uint32_t>(frame_kind::op) &&
      h.kind != static_cast<uint32_t>(frame_kind::data))
    junk();
  return h;
}

op_descriptor net_links::read_op(int peer, const char* doing) {
  auto h = read_header(peer, doing);
  if (h.kind != static_cast<uint32_t>(frame_kind::op) ||
      h.length != sizeof(op_descriptor))
    fail("group '" + group_ + "': rank " + std::to_string(peer) +
         " sent data where rank " + std::to_string(rank_) +
         " expected the start of " + doing +
         "; every rank must call the same collectives in the same order");
  op_descriptor d;
  try {
    peers_[static_cast<size_t>(peer)].recv(&d, sizeof(d));
  } catch (const lumen::channel_error& e) {
    lost(peer, doing, e.code() == lumen::errc::timeout);
  }
  return d;
}

void net_links::read_data(int peer, void* into, size_t n, const char* doing) {
  auto& rd = readers_[static_cast<size_t>(peer)];
  auto& c = peers_[static_cast<size_t>(peer)];
  auto p = static_cast<char*>(into);
  size_t total = n;
  while (n > 0) {
    if (rd.frame_left == 0) {
      auto h = read_header(peer, doing);
      if (h.kind != static_cast<uint32_t>(frame_kind::data))
        fail("group '" + group_ + "': rank " + std::to_string(peer) +
             " started another operation while rank " + std::to_string(rank_) +
             " still expected data of " + doing +
             "; every rank must call the same collectives in the same order");
      rd.frame_left = h.length;
      continue;
    }
    auto k = static_cast<size_t>(std::min<uint64_t>(n, rd.frame_left));
    try {
      c.recv(p, k);
    } catch (const lumen::channel_error& e) {
      lost(peer, doing, e.code() == lumen::errc::timeout);
    }
    p += k;
    n -= k;
    rd.frame_left -= k;
  }
  std::lock_guard<std::mutex> guard{mtx_};
  received_ += total;
}

} // namespace lumen::collective::detail
