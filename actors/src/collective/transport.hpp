#pragma once

// What an algorithm asks of the members it runs between: a transport.
// The algorithms (algorithms/) know the rank, the group's size, the peers
// they talk to and a reduction op; a transport starts an operation (every
// member checks that all called it alike) and moves byte ranges between
// two members. Members in processes talk over channels (net/), members in
// one process through mailboxes in memory (threads/); the algorithms are
// the same over both (Gloo's algorithm.h over transport/pair.h).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lumen/collective/collective.hpp"

namespace lumen::collective::detail {

/// What a member starts, as every other member must start it too.
struct op_descriptor {
  uint64_t seq = 0;  // the member's count of operations in this group
  uint32_t what = 0; // an operation_kind
  uint8_t type = 0;  // ml::dtype
  uint8_t op = 0;    // reduce_op
  uint8_t algorithm = 0;
  uint8_t invalid = 0; // the member refused its own input
  int32_t root = -1;   // broadcast's source, reduce's destination, a peer
  uint32_t reserved2 = 0;
  uint64_t numel = 0; // elements of the buffer (of each tensor for lists)
  uint64_t count = 0; // tensors in a list (allgather, reducescatter)
  uint64_t inline_bytes = 0; // data right behind the descriptor
  char site[48] = {};        // the caller's file:line (call_site_text)
};

/// `site` as an error names it: the file's name (no folders) and the line,
/// cut to fit a descriptor.
void call_site_text(const call_site& site, char (&out)[48]) noexcept;

/// Where rank `rank` called operation `seq` of its group, for an error:
/// "rank 1 called at train.cpp:42 as operation 17".
std::string called_at(int rank, const char* site, uint64_t seq);
std::string called_at(int rank, const call_site& site, uint64_t seq);

enum class operation_kind : uint32_t {
  allreduce = 1,
  reduce,
  broadcast,
  allgather,
  reducescatter,
  barrier,
  send,
};

const char* to_string(operation_kind k) noexcept;

/// A run of pieces out to one peer and in from another, at once (the
/// ring's steps): the pieces to send, in order, and the pieces to receive,
/// each of a size both sides know.
struct exchange_plan {
  struct piece {
    char* data = nullptr;
    size_t n = 0;
  };
  /// To send, in order; `done` may add to it.
  std::deque<piece> out;
  /// How many pieces come in.
  size_t pieces_in = 0;
  /// Where piece i goes (and its size).
  std::function<piece(size_t i)> where;
  /// Whether piece i may come in once `sent` pieces went out (its place
  /// may still be on its way out).
  std::function<bool(size_t i, size_t sent)> may_receive;
  /// Piece i is in: reduce it, queue its forward.
  std::function<void(size_t i)> done;
};

/// What is wrong between rank `p`'s descriptor and rank `me`'s, or empty.
std::string disagreement(const op_descriptor& theirs, int p,
                         const op_descriptor& mine, int me, bool same_op);

class transport;
class flight_recorder;

/// `start` all to all, for transport `t`: `send(peer, mine)` sends this
/// member's descriptor (and the payload it announces) to `peer`, then every
/// peer's descriptor is read; a disagreement, or `problem`, takes the
/// peers' payloads in (so that the links stay in step and the group goes
/// on) and throws. `mine` has its sequence number and flags set.
void agree_all_to_all(
  transport& t, const op_descriptor& mine, bool same_op,
  const std::string& problem,
  const std::function<void(int peer, const op_descriptor& mine)>& send);

/// One member's connections to the others of its group; one operation
/// runs at a time, on the member's thread.
class transport {
public:
  virtual ~transport() = default;

  virtual const std::string& name() const noexcept = 0;
  virtual int world() const noexcept = 0;
  virtual int rank() const noexcept = 0;

  /// Starts an operation: checks `mine` against every other member's
  /// descriptor. A disagreement, or a `problem` a member found with its
  /// own input, fails the operation on every member (each sees it), and
  /// the group goes on. `same_op`: the reduction must agree too. With
  /// `payload` (where the group does not agree by doubling), the first
  /// `payload_bytes` of data for every peer leave with the descriptor (a
  /// small operation's whole message); the peers take them with `recv`
  /// as any other data.
  virtual void start(op_descriptor mine, bool same_op,
                     const std::string& problem = {},
                     const void* payload = nullptr,
                     size_t payload_bytes = 0) = 0;

  /// Whether `start` agrees in log2 N pairwise rounds (a power-of-two
  /// group of more than two), which `agree_by_doubling` can fill with
  /// data.
  bool agrees_by_doubling() const noexcept {
    return world() > 2 && (world() & (world() - 1)) == 0;
  }

  /// What each round of agreeing by doubling carries besides the
  /// agreement: this member's partial result (`send`), and how to take
  /// the partner's in (`take`: its bytes, to `recv`, and whether everyone
  /// heard of so far agrees), which makes the rounds a recursive-doubling
  /// all-reduce.
  struct doubling_data {
    std::function<std::pair<const char*, size_t>()> send;
    std::function<void(int partner, uint64_t bytes, bool agreed)> take;
  };

  /// `agree_by_doubling` for a transport whose `start` is all to all:
  /// `start`, then the rounds' data, each round's a copy sent with
  /// `send_copy` (the partner reads it while this member reduces into its
  /// own).
  void start_then_rounds(const op_descriptor& mine, bool same_op,
                         const std::string& problem, const doubling_data* data,
                         const std::function<void(int peer, const char* bytes,
                                                  size_t n)>& send_copy);

  /// `start` in a power-of-two group: log2 N rounds, rank r with rank
  /// r XOR 2^k in round k, both ways at once; after the last round every
  /// member knows whether all agree, and all name the same pair of ranks
  /// that do not. With `data`, as described there.
  virtual void agree_by_doubling(op_descriptor mine, bool same_op,
                                 const std::string& problem,
                                 const doubling_data* data = nullptr) = 0;

  /// Queues `n` bytes at `data` to `peer`, after those queued before;
  /// they must stay untouched until `flush`. Throws the group's failure
  /// once it is broken.
  virtual void post(int peer, const void* data, size_t n) = 0;

  /// Queues a copy of `d` to `peer` (a point-to-point call's descriptor,
  /// or its answer), which takes it with `recv_op`.
  virtual void post_op(int peer, const op_descriptor& d) = 0;

  /// Returns once everything posted left (or was taken): its buffers may
  /// change.
  virtual void flush() = 0;

  /// Receives exactly `n` bytes of data from `peer` into `into`.
  virtual void recv(int peer, void* into, size_t n, const char* doing) = 0;

  /// The next descriptor `peer` posted with `post_op`.
  virtual op_descriptor recv_op(int peer, const char* doing) = 0;

  /// Runs `plan`: sends its pieces to `right` while it receives its
  /// pieces from `left`.
  virtual void exchange(int right, int left, exchange_plan& plan,
                        const char* doing) = 0;

  /// Breaks the group with `why` (the first cause wins, on every member)
  /// and throws it as a `collective_error` carrying `code`.
  [[noreturn]] virtual void fail(const std::string& why, errc code) = 0;

  /// How long the member waits for a peer before it fails the group.
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;

  /// The all-reduce algorithm set for a group whose members are apart
  /// (processes, a simulated cluster); `threads` groups keep their own.
  allreduce_algorithm algorithm() const noexcept {
    return algorithm_;
  }
  void set_algorithm(allreduce_algorithm a) noexcept {
    algorithm_ = a;
  }

  /// The member's next operation, `what` of `bytes` called at `site`
  /// (op_span's): counts it, and its descriptor and errors name the site;
  /// the flight recorder, if on, records it.
  void begin_call(const call_site& site, const char* what,
                  uint64_t bytes) noexcept {
    ++calls_;
    site_ = site; // its text only where a descriptor or an error needs it
    if (recorder_)
      record_begin(what, bytes);
  }

  /// Operation `seq` ended here, or failed.
  void end_call(uint64_t seq, bool failed) noexcept {
    if (recorder_)
      record_end(seq, failed);
  }

  /// The member's flight recorder (recorder.hpp), or nullptr when off.
  const std::shared_ptr<flight_recorder>& recorder() const noexcept {
    return recorder_;
  }
  virtual void record_as(std::shared_ptr<flight_recorder> r) {
    recorder_ = std::move(r);
  }

  /// Where this member called its current operation, for an error:
  /// "rank 0 called at train.cpp:42 as operation 17".
  std::string current_call() const {
    return called_at(rank(), site_, calls_);
  }

  /// The current call's site and sequence number.
  const call_site& site() const noexcept {
    return site_;
  }
  uint64_t calls() const noexcept {
    return calls_;
  }

  /// Fills in the current call's sequence number and site.
  void stamp(op_descriptor& d) const noexcept {
    d.seq = calls_;
    call_site_text(site_, d.site);
  }

  /// Scratch buffer `i` (0 to 3) of the member's operations (one runs at
  /// a time), at least `bytes` long.
  std::vector<char>& scratch(size_t i, size_t bytes) {
    if (scratch_[i].size() < bytes)
      scratch_[i].resize(bytes);
    return scratch_[i];
  }

private:
  void record_begin(const char* what, uint64_t bytes) noexcept;
  void record_end(uint64_t seq, bool failed) noexcept;

  uint64_t calls_ = 0;
  call_site site_;
  std::shared_ptr<flight_recorder> recorder_;
  std::vector<char> scratch_[4];
  allreduce_algorithm algorithm_ = allreduce_algorithm::automatic;
};

} // namespace lumen::collective::detail
