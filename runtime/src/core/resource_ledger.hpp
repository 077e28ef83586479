#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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

  /// What the process offers in all (init_options::resources, plus what
  /// placement groups' bundles reserved here offer).
  resource_request total() const;

  /// What grants hold now; names holding nothing are left out.
  resource_request used() const;

  /// See the free function below, with this ledger's total.
  void require_feasible(const resource_request& r,
                        const std::string& where) const;

  /// Called with why, once, when resources a request names are withdrawn:
  /// while it waits (it is dropped) or while its grant lives.
  using revoke_fn = std::function<void(const std::string& why)>;

  /// Calls `f` with a grant of `r` once it is free: at once if it is, else
  /// on the thread that frees enough. Waiting work is granted in the order
  /// it asked, but work that fits goes ahead of work that does not yet
  /// (a large request may wait while smaller ones keep coming). Requires a
  /// feasible `r`.
  void acquire(const resource_request& r, std::function<void(grant)> f,
               revoke_fn revoked = {});

  /// Adds `extra` to the total (names new to it), granting waiters it lets
  /// fit.
  void offer(const resource_request& extra);

  /// Takes the named resources out of the total: waiting requests naming
  /// one are dropped and, like live grants naming one, revoked with `why`.
  void withdraw(const std::vector<std::string>& names, const std::string& why);

  /// For work that holds `r` and now blocks: gives `r` back for others
  /// until the returned value goes, then takes it again at once, even
  /// beyond the total, so that the work goes on without waiting (as Ray
  /// lets a task blocked in get lend its CPUs).
  grant lend(const resource_request& r);

private:
  struct waiter {
    resource_request request;
    std::function<void(grant)> granted;
    revoke_fn revoked;
  };
  struct state {
    std::mutex mtx;
    resource_request total;     // under mtx
    resource_request used;      // under mtx
    std::deque<waiter> waiting; // under mtx
    // Live grants that may be revoked, by number.
    std::map<uint64_t, std::pair<resource_request, revoke_fn>> revocable;
    uint64_t next_grant = 0; // under mtx
  };

  /// Takes `w.request` out of what is free and wraps it in a grant that
  /// gives it back, granting waiters then. Requires s->mtx.
  static grant take(const std::shared_ptr<state>& s, waiter& w);
  static void give_back(const std::shared_ptr<state>& s,
                        const resource_request& r, uint64_t number);
  /// Grants the waiters that fit now; requires s->mtx. The caller calls
  /// them once it let go of the lock.
  static std::vector<std::pair<std::function<void(grant)>, grant>>
  grant_waiters(const std::shared_ptr<state>& s);

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
