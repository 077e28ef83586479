#pragma once

// The flight recorder: each member's last operations (what, where it was
// called, when it started and ended, its bytes), kept in a ring, so that
// when a group stalls the members can say where each of them is. The
// records of every member in this process are in one registry, written as
// JSON on SIGUSR1 and by `write_flight_records`; a member that times out
// or loses a peer gathers its group's records (its peers' over their
// records service, records_service.hpp) and names who is behind.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "lumen/collective/collective.hpp"

namespace lumen::collective::detail {

/// One operation of a member.
struct op_record {
  uint64_t seq = 0;
  const char* what = "";
  call_site site;
  uint64_t bytes = 0;
  // Unix time, to the kernel's clock tick (1 to 4 ms: the coarse clock
  // costs a few nanoseconds), so that records of processes line up.
  int64_t start_us = 0;
  int64_t end_us = 0; // 0 while it runs
  bool failed = false;
};

/// A place in the ring, written by the member's thread while others may
/// read it: its fields are relaxed atomics (plain stores on x86), and
/// `version` is odd while a write is under way (a seqlock: a reader
/// retries a record that changed under it). A mutex cost 3% of a 4 KiB
/// all-reduce in one process.
struct record_place {
  std::atomic<uint64_t> version{0};
  std::atomic<uint64_t> seq{0};
  std::atomic<const char*> what{""};
  std::atomic<const char*> file{""};
  std::atomic<uint32_t> line{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<int64_t> start_us{0};
  std::atomic<int64_t> end_us{0};
  std::atomic<bool> failed{false};
};

class flight_recorder {
public:
  /// Keeps the last `capacity` operations (none: 0).
  flight_recorder(std::string group, int rank, int world, const char* backend,
                  size_t capacity);

  const std::string& group() const noexcept {
    return group_;
  }
  int rank() const noexcept {
    return rank_;
  }

  /// Operation `seq` starts.
  void begin(const char* what, uint64_t seq, const call_site& site,
             uint64_t bytes) noexcept;

  /// Operation `seq` ended (or failed).
  void end(uint64_t seq, bool failed) noexcept;

  /// The peer this member waits for now, or -1: set around blocking reads.
  void waiting_for(int peer) noexcept {
    waiting_for_.store(peer, std::memory_order_relaxed);
  }

  /// The member as JSON: where it is now and its records, oldest first.
  nlohmann::json to_json() const;

private:
  std::string group_;
  int rank_;
  int world_;
  const char* backend_;
  std::vector<record_place> ring_;    // operation s at s % size
  std::atomic<uint64_t> last_seq_{0}; // the latest operation begun
  int64_t joined_us_;
  std::atomic<int> waiting_for_{-1};
};

/// Now, in microseconds of Unix time.
int64_t unix_us() noexcept;

/// This machine's name, as records and the doctor's keys give it.
std::string host_name();

/// A recorder for a new member, in the process's registry (the capacity
/// `set_flight_recorder` set), or nullptr when the recorder is off.
std::shared_ptr<flight_recorder> make_recorder(const std::string& group,
                                               int rank, int world,
                                               const char* backend);

/// `r.to_json()` with this process's host and pid.
nlohmann::json member_records(const flight_recorder& r);

/// The records of this process's members of `group` (all groups: empty),
/// with the process's host and pid.
nlohmann::json process_records(const std::string& group);

/// Where records files go: set_flight_records_dir, else
/// $LUMEN_FLIGHT_RECORDS, else ~/.lumen/flight.
std::string records_dir();

/// Writes `doc` as `name` in records_dir (atomically: readers never see
/// half a file); returns the path.
std::string write_records_file(const std::string& name,
                               const nlohmann::json& doc);

/// Where member `m` (its records) is, in words: "in allreduce at
/// train.cpp:42 (operation 17) for 3.1 s, waiting for rank 2", or
/// "outside any collective for 10.2 s, last called barrier at
/// train.cpp:40 as operation 16".
std::string describe_member(const nlohmann::json& m);

/// The records of `group`'s members that answered (`members`) together:
/// {"group", "world", "members" (by rank), "behind" ([{"rank",
/// "operations_behind"}]: behind the member furthest on), "unanswered"
/// (ranks), "summary" (those in words)}.
nlohmann::json view_group(const std::string& group, int world,
                          const std::vector<nlohmann::json>& members);

/// For a timeout or a lost peer in `group` of `world` members, whose
/// members' records are `members` (those that answered): writes them with
/// `why` and returns the sentence an error appends, naming the file, the
/// members behind and by how many operations, and those that did not
/// answer.
std::string report_stall(const std::string& group, int world,
                         const std::string& why,
                         const std::vector<nlohmann::json>& members);

/// report_stall for a group whose members are all in this process (none
/// recorded: empty).
std::string report_local_stall(const std::string& group, int world,
                               const std::string& why) noexcept;

} // namespace lumen::collective::detail
