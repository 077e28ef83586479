#pragma once

// The store behind lumen/kv.hpp: the head's for a cluster, a process's
// own outside one. Both keep the same bounds, checked here.

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace lumen::detail {

inline constexpr size_t kv_max_key = 256;
inline constexpr size_t kv_max_value = size_t{1} << 20;
inline constexpr size_t kv_max_total = size_t{64} << 20;

/// `keys` as one string (a head's answer): each key's length in four
/// bytes, then the key.
std::string pack_keys(const std::vector<std::string>& keys);
std::vector<std::string> unpack_keys(const std::string& packed);

/// Why `key` with a value of `value_size` bytes cannot be stored, or
/// empty; the text names the bound and the fix.
std::string kv_misfit(const std::string& key, size_t value_size);

class kv_store {
public:
  struct put_result {
    bool stored = false;
    std::string refusal; // set when the entry breaks a bound
  };

  put_result put(const std::string& key, std::string value, bool overwrite);

  std::optional<std::string> get(const std::string& key) const;

  bool erase(const std::string& key);

  std::vector<std::string> keys(const std::string& prefix) const;

private:
  mutable std::mutex mtx_;
  std::map<std::string, std::string> entries_;
  size_t bytes_ = 0; // keys and values
};

} // namespace lumen::detail
