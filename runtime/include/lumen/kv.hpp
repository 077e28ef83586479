#pragma once

// A small key-value store for the whole cluster, kept by the head, as
// Ray's internal KV: where processes leave declarations and settings for
// each other (a collective group's members, say), not data.
//
//   lumen::kv::put("job/owner", "alice");
//   auto owner = lumen::kv::get("job/owner"); // in any process of the cluster
//
// Keys have 1 to 256 bytes, values up to 1 MiB, the store up to 64 MiB.
// Outside a cluster the store is this process's own. A head that is
// restarted starts with an empty store.

#include <optional>
#include <string>
#include <vector>

namespace lumen::kv {

/// Sets `key` to `value`; with `overwrite` false an existing value stays
/// (a way to claim a key: one process of many succeeds). Returns whether
/// `value` was stored. Throws `usage_error` for a
/// key or value out of bounds or a full store, and `error`
/// (`errc::head_unreachable`) while the head is lost.
bool put(const std::string& key, const std::string& value,
         bool overwrite = true);

/// The value of `key`, or nothing.
std::optional<std::string> get(const std::string& key);

/// Removes `key`; whether it was there.
bool erase(const std::string& key);

/// The keys that begin with `prefix` (all: empty), in order (Ray's
/// internal_kv_list): how a tool finds what processes left, such as the
/// collective groups' members `lumen doctor` lists.
std::vector<std::string> keys(const std::string& prefix);

} // namespace lumen::kv
