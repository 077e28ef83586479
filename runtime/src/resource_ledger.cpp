#include "resource_ledger.hpp"

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
  detail::require_feasible(r, state_->total, where);
}

void resource_ledger::acquire(const resource_request& r,
                              std::function<void(grant)> f) {
  grant g;
  {
    std::lock_guard<std::mutex> guard{state_->mtx};
    if (!fits(r, state_->total, state_->used)) {
      state_->waiting.push_back({r, std::move(f)});
      return;
    }
    g = take(state_, r);
  }
  f(std::move(g));
}

resource_ledger::grant resource_ledger::lend(const resource_request& r) {
  give_back(state_, r);
  return grant{nullptr, [s = state_, r](void*) {
                 std::lock_guard<std::mutex> guard{s->mtx};
                 for (auto& [name, amount] : r)
                   s->used[name] += amount;
               }};
}

resource_ledger::grant resource_ledger::take(const std::shared_ptr<state>& s,
                                             const resource_request& r) {
  for (auto& [name, amount] : r)
    s->used[name] += amount;
  return grant{nullptr, [s, r](void*) { give_back(s, r); }};
}

void resource_ledger::give_back(const std::shared_ptr<state>& s,
                                const resource_request& r) {
  std::vector<std::pair<std::function<void(grant)>, grant>> ready;
  {
    std::lock_guard<std::mutex> guard{s->mtx};
    for (auto& [name, amount] : r)
      s->used[name] -= amount;
    for (auto i = s->waiting.begin(); i != s->waiting.end();) {
      if (fits(i->request, s->total, s->used)) {
        ready.emplace_back(std::move(i->granted), take(s, i->request));
        i = s->waiting.erase(i);
      } else {
        ++i;
      }
    }
  }
  // Outside the lock: a grantee may ask for more, or give its grant back.
  for (auto& [granted, g] : ready)
    granted(std::move(g));
}

} // namespace lumen::detail
