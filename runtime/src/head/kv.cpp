#include "lumen/kv.hpp"

#include <cstring>

#include "lumen/errors.hpp"

#include "core/process_runtime.hpp"
#include "head/kv_store.hpp"

namespace lumen {

namespace detail {

std::string kv_misfit(const std::string& key, size_t value_size) {
  if (key.empty() || key.size() > kv_max_key)
    return "a key of " + std::to_string(key.size()) +
           " bytes; give one of 1 to " + std::to_string(kv_max_key);
  if (value_size > kv_max_value)
    return "a value of " + std::to_string(value_size) + " bytes for key '" +
           key + "'; values hold up to 1 MiB: keep data in objects " +
           "(lumen::put) and the key-value store for small declarations";
  return {};
}

kv_store::put_result kv_store::put(const std::string& key, std::string value,
                                   bool overwrite) {
  if (auto misfit = kv_misfit(key, value.size()); !misfit.empty())
    return {false, misfit};
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = entries_.find(key);
  if (i != entries_.end() && !overwrite)
    return {false, {}};
  size_t before = i == entries_.end() ? 0 : key.size() + i->second.size();
  size_t after = bytes_ - before + key.size() + value.size();
  if (after > kv_max_total)
    return {false, "the key-value store is full (64 MiB); erase keys no "
                   "longer needed (lumen::kv::erase)"};
  bytes_ = after;
  entries_[key] = std::move(value);
  return {true, {}};
}

std::optional<std::string> kv_store::get(const std::string& key) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = entries_.find(key);
  if (i == entries_.end())
    return std::nullopt;
  return i->second;
}

bool kv_store::erase(const std::string& key) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = entries_.find(key);
  if (i == entries_.end())
    return false;
  bytes_ -= key.size() + i->second.size();
  entries_.erase(i);
  return true;
}

std::vector<std::string> kv_store::keys(const std::string& prefix) const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<std::string> out;
  for (auto i = entries_.lower_bound(prefix);
       i != entries_.end() && i->first.compare(0, prefix.size(), prefix) == 0;
       ++i)
    out.push_back(i->first);
  return out;
}

std::string pack_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (auto& k : keys) {
    auto n = static_cast<uint32_t>(k.size());
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    out += k;
  }
  return out;
}

std::vector<std::string> unpack_keys(const std::string& packed) {
  std::vector<std::string> out;
  for (size_t at = 0; at + sizeof(uint32_t) <= packed.size();) {
    uint32_t n;
    std::memcpy(&n, packed.data() + at, sizeof n);
    at += sizeof n;
    if (n > packed.size() - at)
      break; // not the head's packing: keep what was whole
    out.push_back(packed.substr(at, n));
    at += n;
  }
  return out;
}

// In a cluster the store is the head's; outside, this process's own.
bool process_runtime::kv_put(const std::string& key, const std::string& value,
                             bool overwrite) {
  auto result = cluster_ ? cluster_->kv_put(key, value, overwrite)
                         : kv_.put(key, value, overwrite);
  if (!result.refusal.empty())
    throw usage_error("lumen::kv::put: " + result.refusal);
  return result.stored;
}

std::optional<std::string> process_runtime::kv_get(const std::string& key) {
  return cluster_ ? cluster_->kv_get(key) : kv_.get(key);
}

bool process_runtime::kv_erase(const std::string& key) {
  return cluster_ ? cluster_->kv_erase(key) : kv_.erase(key);
}

std::vector<std::string> process_runtime::kv_keys(const std::string& prefix) {
  return cluster_ ? cluster_->kv_keys(prefix) : kv_.keys(prefix);
}

} // namespace detail

namespace kv {

namespace {

/// Throws the `usage_error` for a key or value out of bounds, before any
/// of it goes to the head.
void require_fit(const char* call, const std::string& key, size_t size) {
  if (auto misfit = detail::kv_misfit(key, size); !misfit.empty())
    throw usage_error(std::string{"lumen::kv::"} + call + ": " + misfit);
}

} // namespace

bool put(const std::string& key, const std::string& value, bool overwrite) {
  require_fit("put", key, value.size());
  return detail::current_runtime().kv_put(key, value, overwrite);
}

std::optional<std::string> get(const std::string& key) {
  require_fit("get", key, 0);
  return detail::current_runtime().kv_get(key);
}

bool erase(const std::string& key) {
  require_fit("erase", key, 0);
  return detail::current_runtime().kv_erase(key);
}

std::vector<std::string> keys(const std::string& prefix) {
  if (prefix.size() > detail::kv_max_key)
    throw usage_error("lumen::kv::keys: a prefix of " +
                      std::to_string(prefix.size()) +
                      " bytes matches no key; keys have at most " +
                      std::to_string(detail::kv_max_key));
  return detail::current_runtime().kv_keys(prefix);
}

} // namespace kv

} // namespace lumen
