#include "collective/net/records_service.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <future>
#include <map>

#include <lumen/cluster.hpp>
#include <lumen/kv.hpp>
#include <nlohmann/json.hpp>

#include "collective/recorder.hpp"

namespace lumen::collective::detail {

namespace {

/// An answer longer than this is not a member's records.
constexpr uint64_t max_answer = uint64_t{64} << 20;

std::string name_of(const std::string& group, int rank) {
  return records_prefix + group + "/" + std::to_string(rank);
}

} // namespace

records_service::records_service(std::shared_ptr<flight_recorder> recorder,
                                 const std::string& group, int rank, int world)
  : recorder_(std::move(recorder))
  , name_(name_of(group, rank))
  , listener_(lumen::listen(name_)) {
  nlohmann::json where{{"world", world},
                       {"node", lumen::this_node_id()},
                       {"host", host_name()},
                       {"pid", static_cast<int64_t>(::getpid())}};
  try {
    lumen::kv::put(name_, where.dump());
  } catch (const lumen::error&) {
    // Without the key the doctor does not list the group; the records are
    // still served to its members, who know the name.
  }
  thread_ = std::thread{[this] { serve(); }};
}

records_service::~records_service() {
  stopping_ = true;
  try {
    lumen::kv::erase(name_);
    lumen::connect(name_, std::chrono::milliseconds(500)); // wakes `serve`
  } catch (const lumen::error&) {
    // The runtime is gone: its end woke `serve` already.
  }
  thread_.join();
}

void records_service::serve() {
  for (;;) {
    lumen::channel c;
    try {
      c = listener_.accept(std::chrono::seconds(1));
    } catch (const lumen::channel_error& e) {
      if (e.code() == lumen::errc::timeout && !stopping_)
        continue;
      return; // the runtime shut down
    }
    if (stopping_)
      return;
    try {
      auto text = member_records(*recorder_).dump();
      uint64_t n = text.size();
      c.set_timeout(std::chrono::seconds(2));
      c.send(&n, sizeof n);
      c.send(text.data(), text.size());
    } catch (const lumen::error&) {
      // The asker left: nothing to tell it.
    }
  }
}

std::optional<nlohmann::json> fetch_records(const std::string& group, int rank,
                                            std::chrono::milliseconds timeout) {
  try {
    auto c = lumen::connect(name_of(group, rank), timeout);
    c.set_timeout(timeout);
    uint64_t n = 0;
    c.recv(&n, sizeof n);
    if (n > max_answer)
      return std::nullopt;
    std::string text(static_cast<size_t>(n), '\0');
    c.recv(text.data(), text.size());
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return std::nullopt;
    return j;
  } catch (const lumen::error&) {
    return std::nullopt;
  }
}

std::vector<nlohmann::json> fetch_peers(const std::string& group, int world,
                                        int rank, int gone,
                                        std::chrono::milliseconds timeout) {
  std::vector<std::future<std::optional<nlohmann::json>>> asked;
  for (int p = 0; p < world; ++p)
    if (p != rank && p != gone)
      asked.push_back(
        std::async(std::launch::async, fetch_records, group, p, timeout));
  std::vector<nlohmann::json> out;
  for (auto& a : asked)
    if (auto j = a.get())
      out.push_back(std::move(*j));
  return out;
}

nlohmann::json examine_groups(const std::string& only,
                              std::chrono::milliseconds timeout) {
  // Keys are "lumen.records/GROUP/RANK"; a group's name may hold '/'.
  struct group_keys {
    int world = 0;
    nlohmann::json registered = nlohmann::json::object();
  };
  std::map<std::string, group_keys> groups;
  for (auto& key : lumen::kv::keys(records_prefix)) {
    auto slash = key.rfind('/');
    auto group = key.substr(std::strlen(records_prefix),
                            slash - std::strlen(records_prefix));
    if (!only.empty() && group != only)
      continue;
    auto value = lumen::kv::get(key);
    auto where = nlohmann::json::parse(value.value_or(""), nullptr, false);
    if (where.is_discarded() || !where.is_object() ||
        !where["world"].is_number_integer())
      continue;
    auto& g = groups[group];
    // A key names its group's size: bounded, as it sets how many to ask.
    g.world = std::clamp(where.value("world", 0), g.world, 4096);
    g.registered[key.substr(slash + 1)] = where;
  }
  // Every member of every group at once: the members of groups whose
  // processes died (their keys stay) cost one timeout in all.
  std::map<std::string, std::vector<std::future<std::optional<nlohmann::json>>>>
    asked;
  for (auto& [group, g] : groups)
    for (int r = 0; r < g.world; ++r)
      asked[group].push_back(
        std::async(std::launch::async, fetch_records, group, r, timeout));
  nlohmann::json out{{"groups", nlohmann::json::array()}};
  for (auto& [group, g] : groups) {
    std::vector<nlohmann::json> members;
    for (auto& a : asked[group])
      if (auto j = a.get())
        members.push_back(std::move(*j));
    auto view = view_group(group, g.world, members);
    view["registered"] = g.registered;
    out["groups"].push_back(std::move(view));
  }
  return out;
}

} // namespace lumen::collective::detail

namespace lumen::collective {

std::string examine_groups(const std::string& group,
                           std::chrono::milliseconds timeout) {
  return detail::examine_groups(group, timeout).dump();
}

} // namespace lumen::collective
