#pragma once

// A member's records, served to whoever asks over a channel: the members
// of its group gathering records when one of them times out or loses a
// peer, and `lumen doctor`. Rank r of group G listens under
// "lumen.records/G/r" on a thread of its own, which answers while the
// member's own thread is busy (stuck in its compute, the usual hang), and
// leaves "lumen.records/G/r" in the cluster's key-value store (its world,
// node, host and pid) so that the doctor finds every group.

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <lumen/channel.hpp>
#include <nlohmann/json_fwd.hpp>

namespace lumen::collective::detail {

class flight_recorder;

/// The key prefix (and channel prefix) of members' records.
inline constexpr const char* records_prefix = "lumen.records/";

/// How long a member gathering records waits for each other member: long
/// enough for a live process's thread to answer, short beside a group's
/// timeout. A member whose group broke serves its records this long
/// after, for the others gathering them after the same stall.
inline constexpr std::chrono::milliseconds records_wait{3000};

class records_service {
public:
  /// Serves `recorder`'s records for rank `rank` of `group` (of `world`).
  records_service(std::shared_ptr<flight_recorder> recorder,
                  const std::string& group, int rank, int world);

  /// Stops serving and withdraws the key.
  ~records_service();

  records_service(const records_service&) = delete;
  records_service& operator=(const records_service&) = delete;

private:
  void serve();

  std::shared_ptr<flight_recorder> recorder_;
  std::string name_;
  lumen::channel_listener listener_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

/// Rank `rank` of `group`'s records (flight_recorder::to_json, with its
/// host and pid), or nothing if it did not answer within `timeout`.
std::optional<nlohmann::json> fetch_records(const std::string& group, int rank,
                                            std::chrono::milliseconds timeout);

/// The records of every rank of `group` but `rank` and `gone` that
/// answers, asked at once, each within `timeout`.
std::vector<nlohmann::json> fetch_peers(const std::string& group, int world,
                                        int rank, int gone,
                                        std::chrono::milliseconds timeout);

/// Every group of the cluster whose members left their keys (`only`: that
/// group alone), every member asked at once within `timeout`: a JSON
/// object {"groups": [view_group's, with "registered": each rank's host
/// and pid as its key says, answered or not]}.
nlohmann::json examine_groups(const std::string& only,
                              std::chrono::milliseconds timeout);

} // namespace lumen::collective::detail
