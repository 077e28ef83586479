#include "lumen/errors.hpp"

#include "sim/sim_runtime.hpp"

// The key-value store of a simulated cluster: the head's, on node-0, as in
// a real cluster; a call from another node costs its trip there and back.

namespace lumen::detail {

namespace {

/// What a request carries besides its key and value, and an answer's
/// least size: a frame's header and a flag.
constexpr uint64_t frame = 24;

const std::string put_name = "kv put";
const std::string get_name = "kv get";
const std::string erase_name = "kv erase";
const std::string keys_name = "kv keys";

} // namespace

template <class R>
R sim_runtime::at_head(const std::string& what, uint64_t bytes,
                       std::function<R()> op,
                       const std::function<uint64_t(const R&)>& back) {
  int from = world_.here();
  if (from == 0)
    return op();
  auto work = world_.new_work();
  auto answer = std::make_shared<std::optional<R>>();
  auto thrown = std::make_shared<std::exception_ptr>();
  world_.send(from, 0, bytes, what, work, [=, &what] {
    uint64_t size = frame;
    try {
      auto r = op();
      size += back(r);
      world_.send(
        0, from, size, what, work,
        [answer, r = std::move(r)]() mutable { *answer = std::move(r); });
    } catch (...) {
      world_.send(0, from, size, what, work,
                  [thrown, e = std::current_exception()] { *thrown = e; });
    }
  });
  auto ready = [&] { return answer->has_value() || *thrown; };
  // The answer's arrival is an event: a watch sees it.
  world_.watch(ready, sim::no_deadline);
  if (*thrown)
    std::rethrow_exception(*thrown);
  return std::move(**answer);
}

bool sim_runtime::kv_put(const std::string& key, const std::string& value,
                         bool overwrite) {
  return at_head<bool>(
    put_name, frame + key.size() + value.size(),
    [this, key, value, overwrite] {
      auto r = kv_.put(key, value, overwrite);
      if (!r.refusal.empty())
        throw usage_error("lumen::kv::put: " + r.refusal);
      return r.stored;
    },
    [](const bool&) { return uint64_t{0}; });
}

std::optional<std::string> sim_runtime::kv_get(const std::string& key) {
  return at_head<std::optional<std::string>>(
    get_name, frame + key.size(), [this, key] { return kv_.get(key); },
    [](const std::optional<std::string>& v) {
      return v ? uint64_t{v->size()} : uint64_t{0};
    });
}

bool sim_runtime::kv_erase(const std::string& key) {
  return at_head<bool>(
    erase_name, frame + key.size(), [this, key] { return kv_.erase(key); },
    [](const bool&) { return uint64_t{0}; });
}

std::vector<std::string> sim_runtime::kv_keys(const std::string& prefix) {
  return at_head<std::vector<std::string>>(
    keys_name, frame + prefix.size(),
    [this, prefix] { return kv_.keys(prefix); },
    [](const std::vector<std::string>& keys) {
      return uint64_t{pack_keys(keys).size()};
    });
}

} // namespace lumen::detail
