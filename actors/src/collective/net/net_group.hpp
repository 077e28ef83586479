#pragma once

// A member of a group whose members may be in other processes or on other
// nodes. Members meet through channels (lumen/channel.hpp): rank r listens
// under "lumen.collective/GROUP/r", which claims the rank cluster-wide,
// connects to every lower rank and accepts every higher one, so that each
// pair of members has one channel: the transport (transport.hpp) of members
// in processes.

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
#include "collective/net/records_service.hpp"
#include "collective/transport.hpp"

namespace lumen::collective::detail {

class net_group : public transport {
public:
  /// Claims `rank` and connects to every other member, waiting up to
  /// `timeout` for them; throws `collective_error` naming who did not
  /// come, a rank claimed twice, or members that disagree on the size.
  net_group(std::string name, int world, int rank,
            std::chrono::milliseconds timeout);

  /// A member whose group broke serves its records `records_wait` longer,
  /// for the others gathering them after the same stall.
  ~net_group() override;

  const std::string& name() const noexcept override {
    return links_->group();
  }
  int world() const noexcept override {
    return links_->world();
  }
  int rank() const noexcept override {
    return links_->rank();
  }

  net_links& links() noexcept {
    return *links_;
  }

  /// All to all (every member sends its descriptor to every other, with
  /// the payload in the same write), or, in a power-of-two group of more
  /// than two, by recursive doubling (then without the payload, which
  /// leaves as data). A failed start takes the peers' payloads in and
  /// drops them, so that the channels stay in step.
  void start(op_descriptor mine, bool same_op, const std::string& problem = {},
             const void* payload = nullptr, size_t payload_bytes = 0) override;

  /// Each member tells its partner its own descriptor and what it knows:
  /// whether the members it heard of disagree, with the lowest pair of
  /// ranks that does. If its own and its partner's half agree each within
  /// and with each other, so does their union; after the last round every
  /// member knows of all, and all name the same pair. The round's data
  /// leaves in the agreement's write.
  void agree_by_doubling(op_descriptor mine, bool same_op,
                         const std::string& problem,
                         const doubling_data* data = nullptr) override;

  void post(int peer, const void* data, size_t n) override {
    links_->post(peer, frame_kind::data, data, n);
  }
  void post_op(int peer, const op_descriptor& d) override {
    links_->post_copy(peer, frame_kind::op, &d, sizeof(d));
  }
  void flush() override {
    links_->flush();
  }
  void recv(int peer, void* into, size_t n, const char* doing) override {
    links_->read_data(peer, into, n, doing);
  }
  op_descriptor recv_op(int peer, const char* doing) override {
    return links_->read_op(peer, doing);
  }
  void exchange(int right, int left, exchange_plan& plan,
                const char* doing) override {
    links_->exchange(right, left, plan, doing);
  }
  [[noreturn]] void fail(const std::string& why, errc code) override {
    links_->fail(why, code);
  }
  void set_timeout(std::chrono::milliseconds timeout) override {
    links_->set_timeout(timeout);
  }

  /// Records with `r`, serves its records to the group and the doctor
  /// (records_service.hpp), and on a timeout or a lost peer found here
  /// gathers every member's records into the error.
  void record_as(std::shared_ptr<flight_recorder> r) override;

  /// The members' shared memory (net_shared.hpp), opened by the first
  /// call, which every member makes at the same point (its first
  /// allreduce_start); nullptr where they do not all share this machine.
  host_segment* segment();

  /// The segment if one is open; never opens it.
  host_segment* open_segment() const noexcept {
    return segment_.get();
  }

private:
  lumen::channel_listener listener_; // holds the rank while the group lives
  std::unique_ptr<net_links> links_;
  std::unique_ptr<host_segment> segment_; // goes before the links it uses
  bool segment_tried_ = false;
  std::unique_ptr<records_service> service_; // stops before the links go
};

} // namespace lumen::collective::detail
