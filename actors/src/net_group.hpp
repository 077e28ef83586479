#pragma once

// A member of a group whose members may be in other processes or on other
// nodes. Members meet through channels (lumen/channel.hpp): rank r listens
// under "lumen.collective/GROUP/r", which claims the rank cluster-wide,
// connects to every lower rank and accepts every higher one, so that each
// pair of members has one channel. The operations are in net_ops.cpp.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <lumen/channel.hpp>

#include "lumen/ml/collective.hpp"

#include "net_link.hpp"

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

  /// Starts an operation: sends `mine` to every other member and checks
  /// theirs against it. A disagreement, or a `problem` a member found with
  /// its own input, fails the operation on every member (each sees it),
  /// and the group goes on. `same_op`: the reduction must agree too.
  /// With `payload`, the first `payload_bytes` of data for every peer
  /// leave with the descriptor, in one write (a small operation's whole
  /// message); a failed start takes the peers' payloads in and drops them.
  void start(op_descriptor mine, bool same_op, const std::string& problem = {},
             const void* payload = nullptr, size_t payload_bytes = 0);

  /// Scratch buffer `i` (0 to 3) of the member's operations (one runs at
  /// a time), at least `bytes` long.
  std::vector<char>& scratch(size_t i, size_t bytes);

private:
  std::string disagreement(const op_descriptor& theirs,
                           const op_descriptor& mine, int p,
                           bool same_op) const;

  lumen::channel_listener listener_; // holds the rank while the group lives
  std::unique_ptr<net_links> links_;
  allreduce_algorithm algorithm_ = allreduce_algorithm::automatic;
  uint64_t seq_ = 0;
  std::vector<std::vector<char>> scratch_; // sized once: refs stay valid
};

} // namespace lumen::collective::detail
