#pragma once

// The transport (transport.hpp) of members that are threads of one
// process: a mailbox for each ordered pair of members. A sender posts the
// address and length of its bytes, not a copy; the receiver copies them
// straight from the sender's buffer into its own (or into the scratch an
// algorithm reduces from), and the sender's `flush` waits until its peers
// took every range it posted. So a range is copied once, as a socket
// copies it, with no buffer between the two members. An operation starts
// in a round of the group's members (local_group, groups.hpp), as the
// all-reduce that reads their buffers does, so that each sees a member
// that called another collective.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lumen/collective/collective.hpp"

#include "collective/groups.hpp"
#include "collective/transport.hpp"

namespace lumen::collective::detail {

/// What the members of one group in this process share: their mailboxes
/// and the transport's failure, the first one for all.
class threads_hub {
public:
  threads_hub(std::string name, int world, std::chrono::milliseconds timeout);

  void set_timeout(std::chrono::milliseconds timeout);

private:
  friend class threads_transport;

  /// A range posted to a peer: borrowed from the sender (`data`) until
  /// taken, or a copy it owns (a descriptor, a round's data).
  struct message {
    const char* data = nullptr;
    size_t n = 0;
    std::vector<char> owned;
    bool is_op = false;
    op_descriptor op;
  };

  /// One direction between two members.
  struct box {
    std::deque<message> queue;
    size_t front_taken = 0; // bytes of the front message copied out
    bool copying = false;   // the receiver copies from the front message
    uint64_t lent = 0;      // borrowed ranges posted
    uint64_t returned = 0;  // ... and taken
  };

  box& between(int from, int to) {
    return boxes_[static_cast<size_t>(from * world_ + to)];
  }

  std::string name_;
  int world_;
  std::chrono::milliseconds timeout_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<box> boxes_;
  std::optional<collective_error> broken_;
};

/// One member's end of the hub.
class threads_transport : public transport {
public:
  threads_transport(std::shared_ptr<local_group> group, int rank);

  const std::string& name() const noexcept override {
    return group_->name();
  }
  int world() const noexcept override {
    return hub_->world_;
  }
  int rank() const noexcept override {
    return rank_;
  }

  /// A round of the group's members; the payload follows as data once
  /// they agreed.
  void start(op_descriptor mine, bool same_op, const std::string& problem = {},
             const void* payload = nullptr, size_t payload_bytes = 0) override;

  /// `start`, then the rounds' data, each a copy: the partner reads it
  /// while this member reduces into its own.
  void agree_by_doubling(op_descriptor mine, bool same_op,
                         const std::string& problem,
                         const doubling_data* data = nullptr) override;

  void post(int peer, const void* data, size_t n) override;
  void post_op(int peer, const op_descriptor& d) override;
  void flush() override;
  void recv(int peer, void* into, size_t n, const char* doing) override;
  op_descriptor recv_op(int peer, const char* doing) override;

  /// Posts the pieces as they come and receives in order; a piece waits
  /// until the right-hand member took the sends it must not overwrite.
  void exchange(int right, int left, exchange_plan& plan,
                const char* doing) override;

  [[noreturn]] void fail(const std::string& why, errc code) override;

  /// The group's timeout, for its rounds and its mailboxes.
  void set_timeout(std::chrono::milliseconds timeout) override {
    group_->set_timeout(timeout);
  }

private:
  void push(int peer, threads_hub::message m);

  /// Before a failure leaves this member: waits until no peer copies from
  /// its buffers and takes back the ranges it lent, which may be gone once
  /// it returned.
  void withdraw(std::unique_lock<std::mutex>& lock);

  /// The next message from `peer`, once it came: a descriptor if `op`,
  /// else data; anything else fails the group (the members are out of
  /// step).
  threads_hub::message& next_from(std::unique_lock<std::mutex>& lock, int peer,
                                  bool op, const char* doing);

  /// Waits under `lock` until `ready`, failing the group at the timeout
  /// (naming `peer`) or throwing its failure once it is broken.
  template <class Ready>
  void wait(std::unique_lock<std::mutex>& lock, Ready ready, int peer,
            const char* doing);

  std::shared_ptr<local_group> group_;
  threads_hub* hub_;
  int rank_;
};

} // namespace lumen::collective::detail
