#include "core/resource_ledger.hpp"

#include <cmath>
#include <sstream>

#include "lumen/errors.hpp"

namespace lumen::detail {

namespace {

double amount_of(const resource_request& r, const std::string& name) {
  auto i = r.find(name);
  return i == r.end() ? 0.0 : i->second;
}

// Amounts are often fractions (0.5 of a GPU): sums of them may miss a
// whole by a rounding error, which must not make work wait forever.
constexpr double slack = 1e-9;

} // namespace

void check_resources(const resource_request& r, const char* api) {
  for (auto& [name, amount] : r) {
    if (name.empty())
      throw usage_error(std::string{api} + ": a resource needs a name");
    if (!std::isfinite(amount) || amount < 0)
      throw usage_error(std::string{api} + ": the amount of '" + name +
                        "' must be a finite number >= 0");
  }
}

bool fits(const resource_request& r, const resource_request& total,
          const resource_request& used) {
  for (auto& [name, amount] : r)
    if (amount > 0 &&
        amount > amount_of(total, name) - amount_of(used, name) + slack)
      return false;
  return true;
}

std::string short_of(const resource_request& r, const resource_request& total) {
  for (auto& [name, amount] : r)
    if (amount > amount_of(total, name) + slack)
      return name;
  return {};
}

std::string describe(const resource_request& r) {
  std::ostringstream out;
  for (auto& [name, amount] : r)
    out << (out.tellp() > 0 ? ", " : "") << name << "=" << amount;
  return out.str();
}

resource_ledger::resource_ledger(resource_request total)
  : state_(std::make_shared<state>()) {
  state_->total = std::move(total);
}

resource_request resource_ledger::total() const {
  std::lock_guard<std::mutex> guard{state_->mtx};
  return state_->total;
}

resource_request resource_ledger::used() const {
  std::lock_guard<std::mutex> guard{state_->mtx};
  resource_request out;
  for (auto& [name, amount] : state_->used)
    if (amount > slack)
      out[name] = amount;
  return out;
}

void require_feasible(const resource_request& r, const resource_request& total,
                      const std::string& where) {
  auto name = short_of(r, total);
  if (name.empty())
    return;
  std::ostringstream has;
  has << amount_of(total, name);
  throw usage_error("the request " + describe(r) + " cannot be met: " + where +
                      " has " + name + "=" + has.str() +
                      " in all; ask for less, or give it more (--resources " +
                      name +
                      "=AMOUNT to lumen start or to the program, or "
                      "init_options::resources)",
                    errc::infeasible);
}

void resource_ledger::require_feasible(const resource_request& r,
                                       const std::string& where) const {
  detail::require_feasible(r, total(), where);
}

void resource_ledger::acquire(const resource_request& r,
                              std::function<void(grant)> f, revoke_fn revoked) {
  waiter w{r, std::move(f), std::move(revoked)};
  grant g;
  {
    std::lock_guard<std::mutex> guard{state_->mtx};
    if (!fits(r, state_->total, state_->used)) {
      state_->waiting.push_back(std::move(w));
      return;
    }
    g = take(state_, w);
  }
  w.granted(std::move(g));
}

void resource_ledger::offer(const resource_request& extra) {
  std::vector<std::pair<std::function<void(grant)>, grant>> ready;
  {
    std::lock_guard<std::mutex> guard{state_->mtx};
    for (auto& [name, amount] : extra)
      state_->total[name] += amount;
    ready = grant_waiters(state_);
  }
  for (auto& [granted, g] : ready)
    granted(std::move(g));
}

void resource_ledger::withdraw(const std::vector<std::string>& names,
                               const std::string& why) {
  auto names_one = [&](const resource_request& r) {
    for (auto& n : names)
      if (r.count(n) > 0)
        return true;
    return false;
  };
  std::vector<revoke_fn> revoked;
  {
    std::lock_guard<std::mutex> guard{state_->mtx};
    auto& s = *state_;
    for (auto& n : names) {
      s.total.erase(n);
      s.used.erase(n);
    }
    for (auto i = s.waiting.begin(); i != s.waiting.end();) {
      if (names_one(i->request)) {
        revoked.push_back(std::move(i->revoked));
        i = s.waiting.erase(i);
      } else {
        ++i;
      }
    }
    for (auto i = s.revocable.begin(); i != s.revocable.end();) {
      if (names_one(i->second.first)) {
        revoked.push_back(std::move(i->second.second));
        i = s.revocable.erase(i);
      } else {
        ++i;
      }
    }
  }
  for (auto& f : revoked)
    if (f)
      f(why);
}

resource_ledger::grant resource_ledger::lend(const resource_request& r) {
  give_back(state_, r, 0);
  return grant{nullptr, [s = state_, r](void*) {
                 std::lock_guard<std::mutex> guard{s->mtx};
                 for (auto& [name, amount] : r)
                   if (s->total.count(name) > 0)
                     s->used[name] += amount;
               }};
}

resource_ledger::grant resource_ledger::take(const std::shared_ptr<state>& s,
                                             waiter& w) {
  for (auto& [name, amount] : w.request)
    s->used[name] += amount;
  uint64_t number = 0;
  if (w.revoked) {
    number = ++s->next_grant;
    s->revocable.emplace(number,
                         std::make_pair(w.request, std::move(w.revoked)));
  }
  return grant{nullptr,
               [s, r = w.request, number](void*) { give_back(s, r, number); }};
}

std::vector<std::pair<std::function<void(resource_ledger::grant)>,
                      resource_ledger::grant>>
resource_ledger::grant_waiters(const std::shared_ptr<state>& s) {
  std::vector<std::pair<std::function<void(grant)>, grant>> ready;
  for (auto i = s->waiting.begin(); i != s->waiting.end();) {
    if (fits(i->request, s->total, s->used)) {
      auto g = take(s, *i);
      ready.emplace_back(std::move(i->granted), std::move(g));
      i = s->waiting.erase(i);
    } else {
      ++i;
    }
  }
  return ready;
}

void resource_ledger::give_back(const std::shared_ptr<state>& s,
                                const resource_request& r, uint64_t number) {
  std::vector<std::pair<std::function<void(grant)>, grant>> ready;
  {
    std::lock_guard<std::mutex> guard{s->mtx};
    // A withdrawn resource is no longer counted.
    for (auto& [name, amount] : r)
      if (s->total.count(name) > 0)
        s->used[name] -= amount;
    if (number != 0)
      s->revocable.erase(number);
    ready = grant_waiters(s);
  }
  // Outside the lock: a grantee may ask for more, or give its grant back.
  for (auto& [granted, g] : ready)
    granted(std::move(g));
}

} // namespace lumen::detail
