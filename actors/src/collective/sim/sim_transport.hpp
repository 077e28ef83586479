#pragma once

// The transport (transport.hpp) of members on a simulated cluster's nodes
// (lumen/sim.hpp): each range a member posts leaves as a message of its
// size plus a frame header, as on a TCP channel, and arrives after the
// simulated link's latency and bandwidth; a member that waits yields to
// the rest of the run. So an algorithm runs here as it does between
// processes, and the virtual time it takes is what its messages cost. A
// failing member tells the others with an abort message, and a member
// whose node the cluster knows is down fails the peers that wait for it.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lumen/collective/collective.hpp"

#include "collective/transport.hpp"

namespace lumen::collective::detail {

struct membership;

/// What the members of one group in a simulated run share: where each
/// runs, what reached each from each, and the failure each knows of.
struct sim_hub {
  struct message {
    std::vector<char> bytes;
    bool is_op = false;
    op_descriptor op;
  };

  std::string name;
  int world = 0;
  uint64_t run = 0;
  std::vector<std::string> nodes;         // by rank; "" until it joined
  std::vector<std::deque<message>> boxes; // [from * world + to], arrived
  std::vector<size_t> front_taken;        // bytes of a box's front read
  std::vector<std::optional<collective_error>> broken; // by rank

  std::deque<message>& between(int from, int to) {
    return boxes[static_cast<size_t>(from * world + to)];
  }
};

class sim_transport : public transport {
public:
  sim_transport(std::shared_ptr<sim_hub> hub, int rank,
                std::chrono::milliseconds timeout);
  /// Gives the rank up.
  ~sim_transport() override;

  const std::string& name() const noexcept override {
    return hub_->name;
  }
  int world() const noexcept override {
    return hub_->world;
  }
  int rank() const noexcept override {
    return rank_;
  }
  void set_timeout(std::chrono::milliseconds timeout) override {
    timeout_ = timeout;
  }

  /// Every member sends its descriptor (and the payload) to every other.
  void start(op_descriptor mine, bool same_op, const std::string& problem = {},
             const void* payload = nullptr, size_t payload_bytes = 0) override;

  /// `start`, then the rounds' data.
  void agree_by_doubling(op_descriptor mine, bool same_op,
                         const std::string& problem,
                         const doubling_data* data = nullptr) override;

  /// Copies the range into the message: `flush` has nothing to wait for.
  void post(int peer, const void* data, size_t n) override;
  void post_op(int peer, const op_descriptor& d) override;
  void flush() override {}
  void recv(int peer, void* into, size_t n, const char* doing) override;
  op_descriptor recv_op(int peer, const char* doing) override;
  void exchange(int right, int left, exchange_plan& plan,
                const char* doing) override;
  [[noreturn]] void fail(const std::string& why, errc code) override;

private:
  void send(int peer, sim_hub::message m);
  /// Waits until `peer`'s next message is in, failing the group if this
  /// member knows it is broken, the cluster knows `peer`'s node is down,
  /// or nothing came within the timeout.
  sim_hub::message& next_from(int peer, bool op, const char* doing);

  std::shared_ptr<sim_hub> hub_;
  int rank_;
  std::chrono::milliseconds timeout_;
  std::string label_; // the group's messages in the run's log
};

/// Joins rank `rank` of group `name` in this simulated run, waiting up to
/// `timeout` of virtual time for every member to join; throws
/// `collective_error` naming who did not come, a rank claimed twice, or
/// members that disagree on the size.
std::shared_ptr<sim_transport>
join_simulated(const std::string& name, int world, int rank,
               std::chrono::milliseconds timeout);

/// The groups of the calling actor (or the script) in this simulated run:
/// every member's work runs on the one thread of the run, so membership
/// goes by actor, not by thread.
std::map<std::string, membership>& simulated_groups();

} // namespace lumen::collective::detail
