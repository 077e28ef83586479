#pragma once

// The groups of this process: who is a member of which (per thread), in a
// group of this process (local_group.hpp), of processes (net/) or of a
// simulated cluster (sim/).

#include <exception>
#include <memory>
#include <string>
#include <thread>

#include "lumen/trace.hpp"

#include "lumen/collective/collective.hpp"

#include "collective/local_group.hpp"
#include "collective/net/net_group.hpp"
#include "collective/transport.hpp"
#include "lumen/util/work_queue.hpp"

namespace lumen::collective::detail {

/// A thread's place in a group: in a `threads` group (`group`), a
/// `processes` one (`net`), or a simulated cluster's (neither); `over` is
/// its transport (the threads transport of `group`, `net`, or the
/// simulated one, collective/sim/).
struct membership {
  std::shared_ptr<local_group> group;
  int rank = 0;
  std::shared_ptr<util::work_queue> lane; // made by the first _async call
  std::shared_ptr<net_group> net;
  std::shared_ptr<transport> over;
  bool declared = false; // joined through create_group's declaration

  const std::string& name() const noexcept {
    return over->name();
  }
  int world() const noexcept {
    return over->world();
  }
};

/// A collective's span in a trace: what it is, the caller's rank and the
/// bytes of its buffer.
class op_span {
public:
  /// Counts the member's operation, called at `site`.
  op_span(const char* what, const membership& m, size_t bytes,
          const call_site& site) noexcept
    : span_(what, "collective")
    , over_(*m.over)
    , unwinding_(std::uncaught_exceptions()) {
    over_.begin_call(site, what, bytes);
    seq_ = over_.calls();
    span_.arg("rank", m.rank).arg("bytes", static_cast<int64_t>(bytes));
  }

  /// Records its end: failed if it ends by an exception.
  ~op_span() {
    over_.end_call(seq_, std::uncaught_exceptions() > unwinding_);
  }

  op_span(const op_span&) = delete;
  op_span& operator=(const op_span&) = delete;

private:
  trace::span span_;
  transport& over_;
  int unwinding_;
  uint64_t seq_ = 0;
};

/// The calling thread's membership of `group`; throws `collective_error`
/// if it has none.
membership& member_of(const std::string& group);

/// The calling thread's membership once the all-reduces it started
/// (allreduce_start) are done: any other operation comes after them.
membership& caught_up(const std::string& group);

/// The calling thread's membership once its _async operations ran: a
/// blocking call comes after them, in the order they were asked for.
const membership& settled(const std::string& group);

} // namespace lumen::collective::detail
