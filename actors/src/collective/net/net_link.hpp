#pragma once

// A member's links to the other members of a group that spans processes:
// one channel (lumen/channel.hpp) to every other rank, a writer thread that
// owns the sending side of all of them, and the way a failure spreads.
//
// On a channel, members exchange frames: a 16-byte header (kind, length)
// and the payload.
//   op     the operation a member starts (op_descriptor): every member
//          sends its descriptor to every other before any data, so that
//          each sees a disagreement itself
//   data   bytes of the operation's buffers, in segments
//   abort  why the group broke, in a sentence
// A member that fails (a dead peer, a timeout, a mismatch, destroy_group)
// sends `abort` with the first cause to every peer and then closes its
// channels: a peer waiting for data from it reads the cause instead, and
// every member's error names the rank that started it, not the neighbour
// that told it.

#include <poll.h>
#include <sys/uio.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <lumen/channel.hpp>

#include "lumen/collective/collective.hpp"

#include "collective/transport.hpp"

namespace lumen::collective::detail {

/// `agree`: what a member of a power-of-two group knows of the members'
/// agreement on an operation (net_group::start).
enum class frame_kind : uint32_t { op = 1, data, abort, agree };

struct frame_header {
  uint32_t magic;
  uint32_t kind;
  uint64_t length;
};

inline constexpr uint32_t frame_magic = 0x4c4c4f43; // "COLL"

/// Longer frames are not ours: data goes in segments far below this, an
/// abort's reason is a sentence.
inline constexpr uint64_t max_frame = uint64_t{1} << 30;
inline constexpr uint64_t max_reason = 4096;

/// How long a failing member gives its aborts to leave before it closes
/// its channels regardless (a peer that does not read must not hold it),
/// and a closed peer to show its last words.
inline constexpr auto abort_grace = std::chrono::milliseconds(500);

/// Bytes of operations' data a member sent and received on its links.
struct link_traffic {
  uint64_t sent = 0;
  uint64_t received = 0;
};

/// poll() without sleeping, for up to 200 µs, giving the core away
/// between tries; returns what poll() returned last (0: nothing ready, go
/// on to wait). A peer's frame on loopback comes within microseconds, and
/// a sleeping member's wake-up costs more than that on a busy machine,
/// which is why MPI's progress loops spin too.
int spin_poll(pollfd* fds, nfds_t count);

/// Why a group's links broke: the message, and the code its
/// `collective_error` carries (the first cause wins, on every member).
struct link_failure {
  std::string why;
  errc code = errc::unspecified;
  bool relayed = false; // a peer's abort: the cause is the peer's to report

  bool empty() const noexcept {
    return why.empty();
  }
};

class net_links {
public:
  /// Takes the channels, one per rank (the member's own is empty).
  net_links(std::string group, int world, int rank,
            std::vector<lumen::channel> peers,
            std::chrono::milliseconds timeout);

  /// Tells the peers this member left (if the group is whole), closes the
  /// channels and joins the writer.
  ~net_links();

  net_links(const net_links&) = delete;
  net_links& operator=(const net_links&) = delete;

  const std::string& group() const noexcept {
    return group_;
  }
  int world() const noexcept {
    return world_;
  }
  int rank() const noexcept {
    return rank_;
  }

  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const noexcept {
    return timeout_;
  }

  /// Whether the channel to `peer` runs over loopback: the peer shares
  /// this machine's kernel (and its shared memory).
  bool is_loopback(int peer) const;

  /// For a member that waits for `peer` elsewhere than on the channel
  /// (net_shared.hpp): fails the group if the peer died or sent its abort
  /// meanwhile; nothing else may come from it then.
  void watch_peer(int peer, const char* doing);

  /// Queues a frame to `peer`; the writer sends it after those queued
  /// before. `data` must stay untouched until `wait_sent` covers the
  /// returned ticket. Throws the group's failure once it is broken.
  uint64_t post(int peer, frame_kind kind, const void* data, size_t n);

  /// As `post`, with a copy of `bytes` (a descriptor, an answer).
  void post_copy(int peer, frame_kind kind, const void* bytes, size_t n);

  /// A frame of `kind` with a copy of `head` (a descriptor), then a data
  /// frame of `data`, written in one go (a small operation's whole message
  /// to a peer); as `post` for the data.
  uint64_t post_head_and_data(int peer, frame_kind kind, const void* head,
                              size_t head_n, const void* data, size_t n);

  /// Returns once the writer sent everything up to `ticket`; throws the
  /// group's failure if it broke first.
  void wait_sent(uint64_t ticket);

  /// Returns once the writer sent everything posted.
  void flush();

  /// Runs `plan` on this thread: sends its pieces to `right` while it
  /// receives its pieces from `left`, by poll(), with the writer idle.
  void exchange(int right, int left, exchange_plan& plan, const char* doing);

  /// Reads the next op descriptor from `peer`.
  op_descriptor read_op(int peer, const char* doing);

  /// Reads the next frame from `peer`, which must be of `kind` and `n`
  /// bytes, into `into`.
  void read_head(int peer, frame_kind kind, void* into, size_t n,
                 const char* doing);

  /// Reads exactly `n` bytes of data frames from `peer` into `into`.
  void read_data(int peer, void* into, size_t n, const char* doing);

  /// Breaks the group with `why` (the first cause wins) and throws it as
  /// a `collective_error` carrying `code`.
  [[noreturn]] void fail(const std::string& why, errc code,
                         bool relayed = false);
  [[noreturn]] void fail(const link_failure& f) {
    fail(f.why, f.code, f.relayed);
  }

  /// The group's failure, or empty.
  link_failure broken();

  /// When the group broke, if it did.
  std::optional<std::chrono::steady_clock::time_point> broken_at();

  /// `stall` gives what a timeout or a lost peer found by this member
  /// adds to its cause (the group's flight records, collective/recorder.hpp);
  /// `gone` is the peer found dead, if any (not worth asking); `recorder`
  /// hears whom the member waits for.
  using stall_report =
    std::function<std::string(const std::string& why, int gone)>;
  void on_stall(stall_report stall, std::shared_ptr<flight_recorder> recorder);

  link_traffic traffic();

private:
  /// Up to two frames for one peer, sent in one system call: a first
  /// frame whose payload the job holds (a descriptor, an abort), and a
  /// data frame whose payload stays the caller's.
  struct job {
    int peer = 0;
    frame_header first{};
    std::string owned; // the first frame's payload
    bool has_first = false;
    frame_header second{};
    const void* data = nullptr;
    size_t n = 0;
    bool has_second = false;
    size_t done = 0; // bytes of the frames already written
    uint64_t ticket = 0;
    bool raw = false; // `owned` alone, no frame: the rest of a cut frame

    bool is_abort() const noexcept {
      return has_first &&
             first.kind == static_cast<uint32_t>(frame_kind::abort);
    }
  };

  /// What came from one peer and was not read yet.
  struct reader {
    uint64_t frame_left = 0; // data bytes of the current data frame
    std::vector<char> buf;
    size_t pos = 0, len = 0;
  };

  uint64_t push(job j);
  void write_loop();
  static size_t frame_bytes(const job& j) noexcept;
  enum class written { ok, gone, timed_out };
  /// Marks `j` done (sent, or its peer lost).
  void finish_locked(const job& j, written how);
  /// Writes what is left of `j`. With `dont_wait`, stops where the socket
  /// is full (`j.done` says how far).
  written write_job(job& j, bool dont_wait);
  /// Exactly `n` bytes from `peer`, through its read buffer; throws
  /// `channel_error`.
  void fill(int peer, void* into, size_t n);
  /// As `fill`, failing the group if the peer is gone or silent.
  void recv_exact(int peer, void* into, size_t n, const char* doing);
  /// Records `why` and queues the aborts (their payload: the code's byte,
  /// then `why`); true if it was the first cause.
  bool break_locked(const std::string& why, errc code);
  void close_all() noexcept;
  [[noreturn]] void lost(int peer, const char* doing, bool timed_out);
  /// Fails with the cause if the writer lost a peer.
  void check_lost();
  /// The abort `peer` left before it closed, or that it is gone.
  link_failure last_words(int peer);
  frame_header read_header(int peer, const char* doing);

  std::string group_;
  int world_;
  int rank_;
  std::vector<lumen::channel> peers_;
  std::vector<reader> readers_;
  std::chrono::milliseconds timeout_;

  std::mutex mtx_;
  // Two, so that a send done on the op thread does not wake the idle
  // writer for nothing (a context switch per message on a busy machine).
  std::condition_variable work_cv_; // the writer waits: a queued job, stopping
  std::condition_variable done_cv_; // the op thread waits: sent, lost, broken
  std::deque<job> queue_;
  uint64_t posted_ = 0;
  uint64_t sent_ = 0;       // tickets done (sent, or dropped once broken)
  bool aborts_out_ = false; // the writer sent the aborts
  bool writing_ = false;    // a write is under way, by either thread
  std::vector<bool> dead_;  // peers a write failed to
  bool stopping_ = false;
  link_failure broken_;
  std::chrono::steady_clock::time_point broken_at_;
  int lost_peer_ = -1;          // the first peer the writer could not send to
  bool lost_timed_out_ = false; // ... because it took nothing in time
  link_traffic traffic_;
  uint64_t received_ = 0;  // op thread only, folded into traffic_
  size_t sent_pieces_ = 0; // of the exchange under way
  // The exchange's frame cut short by a failure: its peer and the bytes it
  // still owes, sent (as zeros) before the aborts so they stay frames.
  int cut_peer_ = -1;
  size_t cut_left_ = 0;
  stall_report stall_;
  int gone_ = -1; // the peer whose process this member found gone
  std::shared_ptr<flight_recorder> recorder_;
  std::thread writer_;
};

} // namespace lumen::collective::detail
