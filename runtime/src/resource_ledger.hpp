#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "lumen/detail/runtime.hpp"

namespace lumen::detail {

/// A process's resources and what its work holds of them, as a Ray node's:
/// work that asks for some waits here until they are free, then holds them
/// (a task while it runs, an actor while it lives).
class resource_ledger {
public:
  /// Keeps its share of the resources while any copy lives.
  using grant = std::shared_ptr<void>;

  explicit resource_ledger(resource_request total);

  const resource_request& total() const noexcept {
    return state_->total;
  }

  /// What grants hold now; names holding nothing are left out.
  resource_request used() const;

  /// See the free function below, with this ledger's total.
  void require_feasible(const resource_request& r,
                        const std::string& where) const;

  /// Calls `f` with a grant of `r` once it is free: at once if it is, else
  /// on the thread that frees enough. Waiting work is granted in the order
  /// it asked, but work that fits goes ahead of work that does not yet
  /// (a large request may wait while smaller ones keep coming). Requires a
  /// feasible `r`.
  void acquire(const resource_request& r, std::function<void(grant)> f);

  /// For work that holds `r` and now blocks: gives `r` back for others
  /// until the returned value goes, then takes it again at once, even
  /// beyond the total, so that the work goes on without waiting (as Ray
  /// lets a task blocked in get lend its CPUs).
  grant lend(const resource_request& r);

private:
  struct waiter {
    resource_request request;
    std::function<void(grant)> granted;
  };
  struct state {
    resource_request total;
    std::mutex mtx;
    resource_request used;      // under mtx
    std::deque<waiter> waiting; // under mtx
  };

  /// Takes `r` out of what is free and wraps it in a grant that gives it
  /// back, granting waiters then. Requires s->mtx.
  static grant take(const std::shared_ptr<state>& s, const resource_request& r);
  static void give_back(const std::shared_ptr<state>& s,
                        const resource_request& r);

  // Grants outlive the ledger if work does (a task held past shutdown).
  std::shared_ptr<state> state_;
};

/// True if `r` fits into what `total` has beyond `used`.
bool fits(const resource_request& r, const resource_request& total,
          const resource_request& used);

/// The first resource of `r` that `total` has less of than asked, or "".
std::string short_of(const resource_request& r, const resource_request& total);

/// Throws `usage_error` (errc::infeasible) naming the first resource of
/// `r` that `where` ("node-1"), which has `total`, has less of.
void require_feasible(const resource_request& r, const resource_request& total,
                      const std::string& where);

/// "gpu=1, cpu=2", for messages.
std::string describe(const resource_request& r);

} // namespace lumen::detail
