#pragma once

// A member of a group whose members may be in other processes or on other
// nodes. Members meet through channels (lumen/channel.hpp): rank r listens
// under "lumen.collective/GROUP/r", which claims the rank cluster-wide,
// connects to every lower rank and accepts every higher one, so that each
// pair of members has one channel. The operations are in net_ops.cpp.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <lumen/channel.hpp>

#include "lumen/collective/collective.hpp"

#include "collective/net/net_link.hpp"
#include "collective/net/net_shared.hpp"

namespace lumen::collective::detail {

class net_group {
public:
  /// Claims `rank` and connects to every other member, waiting up to
  /// `timeout` for them; throws `collective_error` naming who did not
  /// come, a rank claimed twice, or members that disagree on the size.
  net_group(std::string name, int world, int rank,
            std::chrono::milliseconds timeout);

  const std::string& name() const noexcept {
    return links_->group();
  }
  int world() const noexcept {
    return links_->world();
  }
  int rank() const noexcept {
    return links_->rank();
  }

  net_links& links() noexcept {
    return *links_;
  }

  void set_algorithm(allreduce_algorithm a) noexcept {
    algorithm_ = a;
  }
  allreduce_algorithm algorithm() const noexcept {
    return algorithm_;
  }

  /// Starts an operation: checks `mine` against every other member's
  /// descriptor. A disagreement, or a `problem` a member found with its
  /// own input, fails the operation on every member (each sees it), and
  /// the group goes on. `same_op`: the reduction must agree too. All to
  /// all (every member sends its descriptor to every other), or, in a
  /// power-of-two group of more than two, by recursive doubling
  /// (`agree_by_doubling`). With `payload` (all to all only), the first
  /// `payload_bytes` of data for every peer leave with the descriptor, in
  /// one write (a small operation's whole message); a failed start takes
  /// the peers' payloads in and drops them.
  void start(op_descriptor mine, bool same_op, const std::string& problem = {},
             const void* payload = nullptr, size_t payload_bytes = 0);

  /// Whether `start` agrees by recursive doubling.
  bool agrees_by_doubling() const noexcept {
    return world() > 2 && (world() & (world() - 1)) == 0;
  }

  /// What each round of agreeing by doubling carries besides the
  /// agreement: this member's partial result (`send`, written with the
  /// agreement frame), and how to take the partner's in (`take`: its
  /// bytes, and whether everyone heard of so far agrees), which makes
  /// the rounds a recursive-doubling all-reduce.
  struct doubling_data {
    std::function<std::pair<const char*, size_t>()> send;
    std::function<void(int partner, uint64_t bytes, bool agreed)> take;
  };

  /// `start` in a power-of-two group: log2 N rounds, rank r with rank
  /// r XOR 2^k in round k, both ways at once. Each member tells its
  /// partner its own descriptor and what it knows: whether the members
  /// it heard of disagree, with the lowest pair of ranks that does. If
  /// its own and its partner's half agree each within and with each
  /// other, so does their union; after the last round every member knows
  /// of all, and all name the same pair. With `data`, as described there.
  void agree_by_doubling(op_descriptor mine, bool same_op,
                         const std::string& problem,
                         const doubling_data* data = nullptr);

  /// Scratch buffer `i` (0 to 3) of the member's operations (one runs at
  /// a time), at least `bytes` long.
  std::vector<char>& scratch(size_t i, size_t bytes);

  /// The members' shared memory (net_shared.hpp), opened by the first
  /// call, which every member makes at the same point (its first
  /// allreduce_start); nullptr where they do not all share this machine.
  host_segment* segment();

  /// The segment if one is open; never opens it.
  host_segment* open_segment() const noexcept {
    return segment_.get();
  }

private:
  /// What is wrong between rank `p`'s descriptor and rank `me`'s, or
  /// empty.
  static std::string disagreement(const op_descriptor& theirs, int p,
                                  const op_descriptor& mine, int me,
                                  bool same_op);

  lumen::channel_listener listener_; // holds the rank while the group lives
  std::unique_ptr<net_links> links_;
  std::unique_ptr<host_segment> segment_; // goes before the links it uses
  bool segment_tried_ = false;
  allreduce_algorithm algorithm_ = allreduce_algorithm::automatic;
  uint64_t seq_ = 0;
  std::vector<std::vector<char>> scratch_; // sized once: refs stay valid
};

} // namespace lumen::collective::detail
