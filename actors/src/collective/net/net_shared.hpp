#pragma once

// The members of a process group that share a machine all-reduce through
// one shared-memory segment, driven by the threads that start the
// operations (allreduce_start): no bytes through the kernel, no hand-off
// to another thread, no sleeping peer to wake on a busy machine.
//
// The segment holds, per member, a state block (what it published, what
// it finished) and a data region. Starting operation k, a
// member copies its buffer into its region (unless the buffer lies in the
// region's kept part, below), writes a descriptor (where, how many
// elements, which op) and publishes k. Once every member
// published k, each reduces all members' copies in rank order into its
// own buffer, so all get the same bits, and marks k done. A large
// operation of three members or more is split instead: each member
// reduces its own share of the elements, in the same order, into its
// buffer and a place of its region, and copies the others' shares from
// theirs once they are in (each core reads 2(N-1)/N of the bytes, not N-1
// times them). A region's bytes are written again only once every member
// is done with the operation that used them, the lowest free place first.
// A member that waits spins briefly, then sleeps on a futex in the
// segment, and looks at its channels to the others between naps: a dead
// peer or a peer's abort (net_link.hpp) fails the group as on the sockets.
//
// A region begins with a kept part: places a member holds for as long as
// it likes (an allreduce_buffer: the gradient a model writes there, step
// after step), which operations read where they lie, no copy. The member
// writes such a place again only once every member is done with the
// operations that read it (wait_read): a member with two places writes
// one while the others still read the other.
//
// Only members whose channels to each other run over loopback take part
// (members on other machines, or in network namespaces of their own,
// have no memory in common); rank 0 makes the segment, the others map it,
// and it is unlinked as soon as all did, so nothing is left behind when a
// process dies. The segment is sparse: a member takes its pages from
// /dev/shm (fallocate) before it first writes them, so that a /dev/shm too
// small for them (Docker's 64 MB) is an error naming the fix, or memory of
// the process's own for a kept place, never a SIGBUS.

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "lumen/collective/collective.hpp"
#include "lumen/util/spin.hpp"

#include "collective/net/net_link.hpp"

namespace lumen::collective::detail {

class host_segment {
public:
  /// Bytes of a member's data region for copies: a larger operation goes
  /// over the channels. Untouched pages of the segment take no memory.
  static constexpr size_t region_bytes = size_t{64} << 20;
  /// And of its kept part, before them.
  static constexpr size_t kept_bytes = size_t{64} << 20;

  /// Called by every member of the group at the same point (the first
  /// allreduce_start): the segment, or nullptr where the members do not all
  /// share this machine's memory (then all of them get nullptr).
  static std::unique_ptr<host_segment> open(net_links& links);

  ~host_segment();
  host_segment(const host_segment&) = delete;
  host_segment& operator=(const host_segment&) = delete;

  /// Publishes `in` (`numel` elements of `type`), called at `site` as
  /// the member's operation `call` in the group (what errors name), as
  /// the segment's next operation and returns its number there; the
  /// result goes to `out` (which may be `in`, or not overlap it). `in` is
  /// read where it lies if it is in a kept place (and is not `out`),
  /// else copied in (waiting for older operations' places to free up
  /// where /dev/shm holds no more; failing the group where it cannot hold
  /// this one); either way it must stay untouched until the operation is
  /// done.
  uint64_t start(const char* in, char* out, ml::dtype type, size_t numel,
                 reduce_op op, const call_site& site, uint64_t call);

  /// A place of `bytes` in this member's kept part, or nullptr if none is
  /// free or /dev/shm cannot hold it; give it back with `release`.
  char* keep(size_t bytes);
  void release(const char* place) noexcept;
  /// Finishes this member's operations that read the kept place at
  /// `place` and waits until every member is done with them: then it may
  /// be written.
  void wait_read(const char* place);

  /// Finishes the started operations up to `seq`, in order; without
  /// `block`, only those whose peers' data are all in. True once `seq`
  /// is done. Throws collective_error if the group broke.
  bool progress(uint64_t seq, bool block);

  /// Finishes everything started.
  void finish_all() {
    progress(started_, true);
  }

private:
  /// The segment's first page (its doorbell), then each member's state
  /// (its ring of descriptors, each with a call site), then each member's
  /// region: its kept part and its places for copies.
  static constexpr size_t page = 4096;
  static constexpr size_t state_bytes = 2 * page;
  static constexpr size_t member_bytes = kept_bytes + region_bytes;
  static size_t header_bytes(int world) {
    return page + state_bytes * static_cast<size_t>(world);
  }
  static size_t segment_bytes(int world) {
    return header_bytes(world) + static_cast<size_t>(world) * member_bytes;
  }

  struct member_state;
  struct descriptor;
  struct pending {
    uint64_t seq;
    char* out;
    ml::dtype type;
    size_t numel;
    reduce_op op;
    uint64_t call;          // the member's count of it in the group
    bool own_share = false; // split: this member's share is reduced
  };
  struct used {
    uint64_t seq;
    size_t begin, end;
  };

  /// Pages of this member's kept part or of its places for copies (from
  /// `base` in its region) taken so far: those below `reserved`.
  struct reserved_part {
    size_t base;
    uint64_t reserved = 0;
  };

  /// What the segment's errors say the member was doing.
  static constexpr const char* doing = "allreduce_start";

  host_segment(net_links& links, int fd, void* map, size_t map_size);

  /// Takes the pages of `part` up to `end`; false if /dev/shm is full.
  bool reserve(reserved_part& part, size_t end);
  /// Fails the group: /dev/shm cannot hold a copy of `bytes`.
  [[noreturn]] void no_room_for(size_t bytes);

  member_state& state(int rank) const noexcept;
  /// A member's kept part, then the places for copies.
  char* region(int rank) const noexcept;
  /// Waits until `behind(q)` holds for no member q, watching the peers
  /// and the timeout (whose error names the members still behind).
  template <class Behind>
  void wait_for(Behind behind, const char* what);
  /// Whether every member's `counter` reached `seq`; waits for it if
  /// `block` (`what`: what the late ones were to do, for the timeout's
  /// error).
  bool all_reached(std::atomic<uint64_t> member_state::*counter, uint64_t seq,
                   bool block, const char* what);
  /// Wakes the members that sleep in wait_for.
  void ring() noexcept;
  /// The last operation every member is done with.
  uint64_t all_done() const noexcept;
  /// Drops the places of operations every member is done with.
  void forget_done();
  /// The lowest place of `bytes` for copies that no operation reads any
  /// more, waiting for one if need be, taken for operation `seq`.
  size_t place_for(size_t bytes, uint64_t seq);
  /// Whether an operation of `bytes` is split into shares (every member
  /// decides the same from the same operation).
  bool split(size_t bytes) const noexcept;
  /// Reduces the operation's copies (`copies_`): all of them, or this
  /// member's share where it is split; the latter published.
  void reduce(pending& p);
  /// Split: copies the other members' shares into `p.out` once every one
  /// of them is in; false if one is not and `block` is not set.
  bool gather(const pending& p, bool block);
  /// Marks the first pending operation done.
  void finish_front();
  /// Finishes this member's operations up to `seq` and waits until every
  /// member did.
  void wait_done(uint64_t seq);

  net_links& links_;
  int fd_;
  void* map_;
  size_t map_size_;
  int world_, rank_;
  util::poll_pause pause_; // how a waiting member polls
  uint64_t started_ = 0, done_ = 0;
  std::deque<pending> pending_;
  std::vector<used> used_; // places in the region still read, by place
  std::vector<used> kept_; // places kept, by place; seq: the last to read
  std::vector<const char*> copies_; // the members' copies of an operation
  reserved_part kept_pages_{0}, copy_pages_{kept_bytes};
};

} // namespace lumen::collective::detail
