#include "collective/net/net_link.hpp"

#include "collective/recorder.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

// The reading side of a member's links: frames from each peer through a
// read buffer of its own (a small operation's frames cost one system
// call, not four), large data straight into the caller's memory.

namespace lumen::collective::detail {

namespace {

constexpr size_t read_buffer = 64 * 1024;

// An abort's payload: the code's byte, then the cause (break_locked).
link_failure abort_of(const std::string& words) {
  if (words.empty())
    return {"a member aborted the group without a cause", errc::peer_lost,
            true};
  return {words.substr(1), static_cast<errc>(static_cast<uint8_t>(words[0])),
          true};
}

} // namespace

void net_links::fill(int peer, void* into, size_t n) {
  auto& rd = readers_[static_cast<size_t>(peer)];
  auto& c = peers_[static_cast<size_t>(peer)];
  auto out = static_cast<char*>(into);
  auto take = std::min(n, rd.len - rd.pos);
  if (take > 0) {
    std::memcpy(out, rd.buf.data() + rd.pos, take);
    rd.pos += take;
    out += take;
    n -= take;
  }
  if (n == 0)
    return;
  pollfd fd{c.native_handle(), POLLIN, 0};
  // Then the channel's own wait, with its timeout: the recorder hears whom
  // the member waits for meanwhile.
  struct waiting_mark {
    flight_recorder* r;
    ~waiting_mark() {
      if (r)
        r->waiting_for(-1);
    }
  } mark{spin_poll(&fd, 1) == 0 ? recorder_.get() : nullptr};
  if (mark.r)
    mark.r->waiting_for(peer);
  if (n >= read_buffer / 2) {
    c.recv(out, n); // large: no detour through the buffer
    return;
  }
  if (rd.buf.empty())
    rd.buf.resize(read_buffer);
  while (n > 0) {
    rd.pos = 0;
    rd.len = c.recv_some(rd.buf.data(), rd.buf.size());
    take = std::min(n, rd.len);
    std::memcpy(out, rd.buf.data(), take);
    rd.pos = take;
    out += take;
    n -= take;
  }
}

void net_links::recv_exact(int peer, void* into, size_t n, const char* doing) {
  try {
    fill(peer, into, n);
  } catch (const lumen::channel_error& e) {
    lost(peer, doing, e.code() == lumen::errc::timeout);
  }
}

void net_links::check_lost() {
  int peer;
  bool timed_out;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (lost_peer_ < 0 || !broken_.empty())
      return;
    peer = lost_peer_;
    timed_out = lost_timed_out_;
  }
  if (timed_out)
    fail("group '" + group_ + "': rank " + std::to_string(rank_) + " waited " +
           std::to_string(timeout_.count()) + " ms for rank " +
           std::to_string(peer) +
           " to take its data, which it did not; is it calling the same "
           "collective?",
         errc::timeout);
  fail(last_words(peer));
}

link_failure net_links::last_words(int peer) {
  // What the peer sent before it closed is still here to read: skip its
  // frames up to an abort, if it left one.
  peers_[static_cast<size_t>(peer)].set_timeout(abort_grace);
  auto& rd = readers_[static_cast<size_t>(peer)];
  std::vector<char> skip(read_buffer);
  try {
    for (uint64_t left = rd.frame_left; left > 0;) {
      auto k = static_cast<size_t>(std::min<uint64_t>(left, skip.size()));
      fill(peer, skip.data(), k);
      left -= k;
    }
    for (;;) {
      frame_header h{};
      fill(peer, &h, sizeof(h));
      if (h.magic != frame_magic || h.length > max_frame)
        break;
      if (h.kind == static_cast<uint32_t>(frame_kind::abort) &&
          h.length <= max_reason) {
        std::string words(h.length, '\0');
        fill(peer, words.data(), words.size());
        return abort_of(words);
      }
      for (uint64_t left = h.length; left > 0;) {
        auto k = static_cast<size_t>(std::min<uint64_t>(left, skip.size()));
        fill(peer, skip.data(), k);
        left -= k;
      }
    }
  } catch (const lumen::channel_error&) {
    // Closed without a word: the process is gone.
  }
  gone_ = peer;
  return {"group '" + group_ + "': rank " + std::to_string(peer) +
            " is gone (its process died, its machine is unreachable, or it "
            "left the group); rank " +
            std::to_string(rank_) + " could not send to it",
          errc::peer_lost};
}

void net_links::lost(int peer, const char* doing, bool timed_out) {
  auto cause = broken();
  if (!cause.empty())
    fail(cause); // this member closed its own channels
  check_lost();
  auto who = "rank " + std::to_string(peer);
  if (!timed_out)
    gone_ = peer;
  if (timed_out)
    fail("group '" + group_ + "': rank " + std::to_string(rank_) + " waited " +
           std::to_string(timeout_.count()) + " ms for " + who + " during " +
           doing + ", which sent nothing; is it calling the same collective?",
         errc::timeout);
  fail("group '" + group_ + "': " + who +
         " is gone (its process died, its machine is unreachable, or it left "
         "the group) during " +
         doing + "; rank " + std::to_string(rank_) + " lost its link to it",
       errc::peer_lost);
}

frame_header net_links::read_header(int peer, const char* doing) {
  frame_header h{};
  recv_exact(peer, &h, sizeof(h), doing);
  auto junk = [&] {
    fail("group '" + group_ + "': rank " + std::to_string(peer) +
           " sent bytes that are not a collective's frame; do all members "
           "run the same Lumen version?",
         errc::mismatch);
  };
  if (h.magic != frame_magic || h.length > max_frame)
    junk();
  if (h.kind == static_cast<uint32_t>(frame_kind::abort)) {
    if (h.length > max_reason)
      junk();
    std::string words(h.length, '\0');
    try {
      fill(peer, words.data(), words.size());
    } catch (const lumen::channel_error&) {
      fail("group '" + group_ + "': rank " + std::to_string(peer) +
             " broke the group and left",
           errc::peer_lost);
    }
    fail(abort_of(words));
  }
  if (h.kind != static_cast<uint32_t>(frame_kind::op) &&
      h.kind != static_cast<uint32_t>(frame_kind::data) &&
      h.kind != static_cast<uint32_t>(frame_kind::agree))
    junk();
  return h;
}

bool net_links::is_loopback(int peer) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  auto fd = peers_[static_cast<size_t>(peer)].native_handle();
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return false;
  if (addr.ss_family == AF_UNIX)
    return true;
  if (addr.ss_family == AF_INET) {
    auto ip = ntohl(reinterpret_cast<sockaddr_in&>(addr).sin_addr.s_addr);
    return (ip >> 24) == 127;
  }
  if (addr.ss_family == AF_INET6) {
    auto& a = reinterpret_cast<sockaddr_in6&>(addr).sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a))
      return true;
    return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
  }
  return false;
}

void net_links::watch_peer(int peer, const char* doing) {
  auto& rd = readers_[static_cast<size_t>(peer)];
  pollfd fd{peers_[static_cast<size_t>(peer)].native_handle(), POLLIN, 0};
  if (rd.pos == rd.len && ::poll(&fd, 1, 0) == 0)
    return;
  read_header(peer, doing); // an abort, or the channel's end, throws
  fail("group '" + group_ + "': rank " + std::to_string(peer) +
         " sent a collective's frame while rank " + std::to_string(rank_) +
         " waited for it to " + doing +
         "; every rank must call the same collectives in the same order",
       errc::mismatch);
}

op_descriptor net_links::read_op(int peer, const char* doing) {
  op_descriptor d;
  read_head(peer, frame_kind::op, &d, sizeof(d), doing);
  return d;
}

void net_links::read_head(int peer, frame_kind kind, void* into, size_t n,
                          const char* doing) {
  auto h = read_header(peer, doing);
  if (h.kind != static_cast<uint32_t>(kind) || h.length != n)
    fail("group '" + group_ + "': rank " + std::to_string(peer) +
           " sent data where rank " + std::to_string(rank_) +
           " expected the start of " + doing +
           "; every rank must call the same collectives in the same order",
         errc::mismatch);
  recv_exact(peer, into, n, doing);
}

void net_links::read_data(int peer, void* into, size_t n, const char* doing) {
  auto& rd = readers_[static_cast<size_t>(peer)];
  auto p = static_cast<char*>(into);
  size_t total = n;
  while (n > 0) {
    if (rd.frame_left == 0) {
      auto h = read_header(peer, doing);
      if (h.kind != static_cast<uint32_t>(frame_kind::data))
        fail("group '" + group_ + "': rank " + std::to_string(peer) +
               " started another operation while rank " +
               std::to_string(rank_) + " still expected data of " + doing +
               "; every rank must call the same collectives in the same order",
             errc::mismatch);
      rd.frame_left = h.length;
      continue;
    }
    auto k = static_cast<size_t>(std::min<uint64_t>(n, rd.frame_left));
    recv_exact(peer, p, k, doing);
    p += k;
    n -= k;
    rd.frame_left -= k;
  }
  std::lock_guard<std::mutex> guard{mtx_};
  received_ += total;
}

} // namespace lumen::collective::detail
