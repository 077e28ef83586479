#include <sched.h>

#include "collective/net/net_link.hpp"

// The ring's data on the op thread alone: frames out to one peer and in
// from another at once, by poll(), with no writer thread between. On a
// small machine the ring's members then use one thread each, as MPI's and
// gloo's progress loops do, instead of two that take turns on its cores.

namespace lumen::collective::detail {

int spin_poll(pollfd* fds, nfds_t count) {
  using clock = std::chrono::steady_clock;
  int ready = ::poll(fds, count, 0);
  auto until = clock::now() + std::chrono::microseconds(200);
  while (ready == 0 && clock::now() < until) {
    ::sched_yield();
    ready = ::poll(fds, count, 0);
  }
  return ready;
}

void net_links::exchange(int right, int left, exchange_plan& plan,
                         const char* doing) {
  flush(); // the writer is idle: this thread owns both channels now
  auto& out = peers_[static_cast<size_t>(right)];
  auto& in = peers_[static_cast<size_t>(left)];
  auto& rd = readers_[static_cast<size_t>(left)];
  if (rd.buf.empty())
    rd.buf.resize(64 * 1024);
  // The piece on its way out, as a writer's job (written from here).
  job out_job;
  bool out_busy = false;
  // The piece coming in.
  bool have_header = false;
  size_t in_got = 0;
  uint64_t sent = 0, received = 0;
  size_t next_in = 0;
  exchange_plan::piece target{};
  auto wants_in = [&] {
    return next_in < plan.pieces_in && plan.may_receive(next_in, sent_pieces_);
  };
  // The next frame's header (the rest of a header split by TCP follows at
  // once), then what of its payload the read buffer holds already.
  auto start_piece = [&] {
    target = plan.where(next_in);
    auto h = read_header(left, doing); // an abort fails here, with its cause
    if (h.kind != static_cast<uint32_t>(frame_kind::data) ||
        h.length != target.n)
      fail("group '" + group_ + "': rank " + std::to_string(left) +
             " sent a frame out of step with the ring during " + doing +
             "; every rank must call the same collectives in the same order",
           errc::mismatch);
    have_header = true;
    in_got = std::min(target.n, rd.len - rd.pos);
    std::memcpy(target.data, rd.buf.data() + rd.pos, in_got);
    rd.pos += in_got;
  };
  auto finish_piece = [&] {
    if (!have_header || in_got < target.n)
      return;
    received += target.n;
    have_header = false;
    plan.done(next_in++);
  };
  sent_pieces_ = 0;
  auto quiet_since = std::chrono::steady_clock::now();
  while (next_in < plan.pieces_in || out_busy || !plan.out.empty()) {
    // Bytes already in the read buffer need no system call.
    if (wants_in() && !have_header && rd.pos < rd.len) {
      start_piece();
      finish_piece();
      continue;
    }
    if (!out_busy && !plan.out.empty()) {
      auto& p = plan.out.front();
      out_job = job{};
      out_job.peer = right;
      out_job.second = {frame_magic, static_cast<uint32_t>(frame_kind::data),
                        p.n};
      out_job.data = p.data;
      out_job.n = p.n;
      out_job.has_second = true;
      out_busy = true;
    }
    pollfd fds[2];
    nfds_t count = 0;
    if (out_busy)
      fds[count++] = {out.native_handle(), POLLOUT, 0};
    if (wants_in()) {
      if (count == 1 && fds[0].fd == in.native_handle())
        fds[0].events |= POLLIN;
      else
        fds[count++] = {in.native_handle(), POLLIN, 0};
    }
    if (count == 0)
      // Sends come before the pieces that wait for them: cannot happen.
      fail("group '" + group_ + "': the ring's exchange stalled during " +
             doing,
           errc::unspecified);
    int ready = spin_poll(fds, count);
    if (ready == 0) {
      // What is left of the timeout since the last event: a signal's
      // EINTR must not start it again.
      auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
        timeout_ - (std::chrono::steady_clock::now() - quiet_since));
      ready = remaining.count() <= 0
                ? 0
                : ::poll(fds, count, static_cast<int>(remaining.count()));
    }
    if (ready == 0)
      lost(wants_in() ? left : right, doing, true);
    if (ready < 0)
      continue; // EINTR
    quiet_since = std::chrono::steady_clock::now();
    for (nfds_t f = 0; f < count; ++f) {
      auto ev = fds[f].revents;
      if (out_busy && fds[f].fd == out.native_handle() &&
          (ev & (POLLOUT | POLLERR | POLLHUP))) {
        auto how = write_job(out_job, true);
        {
          std::lock_guard<std::mutex> guard{mtx_};
          cut_peer_ = right;
          cut_left_ =
            how == written::ok ? frame_bytes(out_job) - out_job.done : 0;
        }
        if (how == written::timed_out)
          lost(right, doing, true);
        if (how == written::gone)
          fail(last_words(right)); // it may have left the first cause

        if (out_job.done == frame_bytes(out_job)) {
          sent += out_job.n;
          ++sent_pieces_;
          plan.out.pop_front();
          out_busy = false;
        }
      }
      if (fds[f].fd == in.native_handle() && wants_in() &&
          (ev & (POLLIN | POLLERR | POLLHUP))) {
        if (!have_header) {
          start_piece();
        } else {
          try {
            in_got += in.recv_some(target.data + in_got, target.n - in_got);
          } catch (const lumen::channel_error& e) {
            lost(left, doing, e.code() == lumen::errc::timeout);
          }
        }
        finish_piece();
      }
    }
  }
  std::lock_guard<std::mutex> guard{mtx_};
  traffic_.sent += sent;
  received_ += received;
}

} // namespace lumen::collective::detail
