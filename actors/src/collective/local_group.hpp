#pragma once

// The members of one group in this process and the rounds in which they
// meet for each operation (local_group); who is a member of which is
// groups.hpp's. The operations themselves are in collective.cpp; their
// data moves over the group's threads transport (threads/), except the
// all-reduce's, which reads and writes the members' buffers in the rounds
// (allreduce.cpp).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lumen/collective/collective.hpp"

#include "collective/recorder.hpp"
#include "collective/transport.hpp"
#include "lumen/util/spin.hpp"

namespace lumen::collective::detail {

using clock = std::chrono::steady_clock;

class threads_hub;

/// What one member brings to an operation.
struct slot {
  char* data = nullptr; // its buffer, for the all-reduce
  ml::dtype type = ml::dtype::float32;
  size_t numel = 0;
  size_t count = 0; // tensors in a list (allgather, reducescatter)
  reduce_op op = reduce_op::sum;
  bool has_root = false;
  int root = 0;
  allreduce_algorithm algorithm = allreduce_algorithm::automatic;
  operation_kind kind = operation_kind::allreduce;
  std::string problem; // what the member found wrong with its own input
  uint64_t seq = 0;    // the member's count of operations in the group
  call_site site;      // where the member called it
};

/// The root the members agree on is not a rank of the group: a call that
/// cannot be right anywhere (errc::usage), not a disagreement.
inline std::string root_out_of_range(const std::vector<slot>& slots) {
  auto world = static_cast<int>(slots.size());
  if (!slots[0].has_root || (slots[0].root >= 0 && slots[0].root < world))
    return {};
  return std::string{to_string(slots[0].kind)} + " names rank " +
         std::to_string(slots[0].root) +
         ", which is out of range: the group has ranks 0 to " +
         std::to_string(world - 1);
}

/// What the members' slots have wrong together (empty: nothing).
using slot_check = std::function<std::string(const std::vector<slot>&)>;

/// The members of one group in this process, and the operation under way.
/// An operation goes in rounds: every member posts its slot and waits for
/// the others (the last one checks that the slots agree), then each stage
/// of work ends with every member waiting for the others again.
class local_group {
public:
  local_group(std::string name, int world);
  ~local_group();

  const std::string& name() const noexcept {
    return name_;
  }

  int world() const noexcept {
    return world_;
  }

  /// Claims `rank`; false if it is taken.
  bool join(int rank) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (joined_[static_cast<size_t>(rank)])
      return false;
    joined_[static_cast<size_t>(rank)] = true;
    left_[static_cast<size_t>(rank)] = false;
    count_left();
    ++members_;
    return true;
  }

  /// Gives `rank` up; true if it was the last member.
  bool leave(int rank) {
    std::lock_guard<std::mutex> guard{mtx_};
    joined_[static_cast<size_t>(rank)] = false;
    left_[static_cast<size_t>(rank)] = true;
    count_left();
    if (count_ > 0)
      break_with("rank " + std::to_string(rank) +
                   " left the group (destroy_group) while the others waited",
                 errc::peer_lost);
    return --members_ == 0;
  }

  void set_timeout(std::chrono::milliseconds t);

  /// The members' mailboxes (threads_transport.hpp).
  threads_hub& hub() noexcept {
    return *hub_;
  }

  /// Breaks the group for good with `message` (the first cause wins):
  /// every member's next operation fails with it.
  void fail(const std::string& message, errc code) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!broken_)
      broken_ = collective_error(message, code);
    broken_seen_.store(true);
    cv_.notify_all();
  }

  /// Runs one operation for `rank`: posts `mine`, checks all slots with
  /// `check` (an empty answer means they agree), then runs `stage` on the
  /// slots, all members finishing it before any goes on. A template, so
  /// that a call costs no allocation.
  template <class Stage>
  void run(int rank, slot mine, const slot_check& check, Stage&& stage) {
    start(rank, std::move(mine), check);
    stage(static_cast<const std::vector<slot>&>(slots_));
    auto lock = meeting_lock();
    arrive(lock, rank, false, nullptr);
  }

  /// Runs an operation's first meeting alone: the slots checked.
  void start(int rank, slot mine, const slot_check& check) {
    close_quick(rounds_[static_cast<size_t>(rank)].begun);
    auto lock = meeting_lock();
    slots_[static_cast<size_t>(rank)] = std::move(mine);
    arrive(lock, rank, true,
           [&] { return verdict_of(slots_, check, verdict_code_); });
    ++rounds_[static_cast<size_t>(rank)].begun;
    if (!verdict_.empty())
      throw collective_error("group '" + name_ + "': " + verdict_,
                             verdict_code_);
  }

  /// `start` without the lock, for an operation whose stage touches only
  /// the members' copies (the small all-reduce): each member counts itself
  /// in with one atomic operation and spins until all did, as members in
  /// shared memory do (net_shared.hpp); the lock, the condition variable
  /// and the slots' shared vector cost a small all-reduce more than its
  /// bytes. False, `mine` untouched, where the round must be an ordinary
  /// meeting instead (`start`): a member did not come within the spin, or
  /// went to an ordinary meeting (another operation: its verdict names the
  /// disagreement), or the group broke or lost a member. Either way every
  /// member of the round goes the same way.
  bool start_quickly(int rank, slot& mine, const slot_check& check);

  /// The number of rounds member `rank` began: the index of its next.
  uint64_t next_round(int rank) const noexcept {
    return rounds_[static_cast<size_t>(rank)].begun;
  }

  /// Member `rank`'s copy of its input to its round `round`, `bytes` long:
  /// what the others read in the round instead of its buffer, so that it
  /// leaves the round without waiting for them. Two a member, by the
  /// round's parity: one is written again two rounds later, once the round
  /// between began, which every member reached after it was done reading.
  char* staging(int rank, uint64_t round, size_t bytes) {
    auto& b = staging_[2 * static_cast<size_t>(rank) + (round & 1)];
    if (b.size() < bytes)
      b.resize(bytes);
    return b.data();
  }

  /// Member `rank`'s copy in round `round`, while the round goes on: read
  /// here, not from its slot, which it may fill for its next round already.
  const char* staged(int rank, uint64_t round) const {
    return staging_[2 * static_cast<size_t>(rank) + (round & 1)].data();
  }

  // Atomic, not under the lock: every member reads it at every all-reduce,
  // at the same moment.
  void set_algorithm(allreduce_algorithm a) {
    algorithm_.store(a);
  }

  allreduce_algorithm algorithm() const {
    return algorithm_.load(std::memory_order_relaxed);
  }

private:
  /// The lock, to arrive at a meeting: the members come at nearly the same
  /// time, and a std::mutex another holds puts the caller to sleep in the
  /// kernel at once, for microseconds; it is held for less than one.
  std::unique_lock<std::mutex> meeting_lock() {
    std::unique_lock<std::mutex> lock{mtx_, std::defer_lock};
    if (!util::spin_until([&] { return lock.try_lock(); },
                          clock::now() + std::chrono::microseconds(5)))
      lock.lock();
    return lock;
  }

  /// Waits for every member to arrive here; the last runs `last` and wakes
  /// the rest. Throws once the group is broken.
  void arrive(std::unique_lock<std::mutex>& lock, int rank, bool starting,
              const std::function<std::string()>& last) {
    if (broken_)
      throw *broken_;
    if (starting)
      for (size_t r = 0; r < left_.size(); ++r)
        if (left_[r])
          throw collective_error(
            "group '" + name_ + "': rank " + std::to_string(r) +
              " left the group (destroy_group, or its thread ended); a member "
              "must take its rank again before the group can go on",
            errc::peer_lost);
    auto generation = generation_.load();
    arrived_[static_cast<size_t>(rank)] = true;
    if (++count_ == world_) {
      verdict_ = last ? last() : std::string{};
      count_ = 0;
      std::fill(arrived_.begin(), arrived_.end(), false);
      ++generation_;
      cv_.notify_all();
      return;
    }
    // Members of one process come close together: a short spin answers
    // small operations in microseconds, sleeping on the condition variable
    // costs tens of them. The first microseconds stay on the core, as a
    // yield alone costs about one (a system call); then the core is let
    // go to whoever needs it.
    lock.unlock();
    auto moved = [&] {
      return generation_.load(std::memory_order_acquire) != generation;
    };
    auto now = clock::now();
    // Once the last member is in, what this one reads next (the verdict,
    // the slots) stays as the last one left it until this member arrives
    // again: no need for the lock, which would cost another trip of its
    // cache line between the cores.
    if ((util::spin_until(moved, now + std::chrono::microseconds(5)) ||
         util::spin_until(moved, now + std::chrono::microseconds(50),
                          util::poll_pause::yield)) &&
        !broken_seen_.load())
      return;
    lock.lock();
    auto woken = [&] { return generation_ != generation || broken_; };
    // Only the start of an operation has a deadline: once every member is
    // in, each finishes its stage (local work on memory the others may be
    // reading), and none may leave early and free its buffer.
    bool woke = true;
    if (starting)
      woke = cv_.wait_until(lock, clock::now() + timeout_, woken);
    else
      cv_.wait(lock, woken);
    if (!woke) {
      // Each missing member's slot is still its last operation's.
      std::string missing, last;
      for (size_t r = 0; r < arrived_.size(); ++r)
        if (!arrived_[r]) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
          auto& s = slots_[r];
          last +=
            "; " + (s.seq == 0
                      ? "rank " + std::to_string(r) + " called no operation yet"
                      : "last seen: " + std::string{to_string(s.kind)} + ", " +
                          called_at(int(r), s.site, s.seq));
        }
      auto& mine = slots_[static_cast<size_t>(rank)];
      auto why = "rank " + std::to_string(rank) + " waited " +
                 std::to_string(timeout_.count()) + " ms to " +
                 (starting ? "start " : "finish a step of ") +
                 to_string(mine.kind) + " (" +
                 called_at(rank, mine.site, mine.seq) + ") for rank(s) " +
                 missing + ", which did not come" + last +
                 "; destroy the group and make it again";
      if (!broken_)
        why +=
          report_local_stall(name_, world_, "group '" + name_ + "': " + why);
      break_with(why, errc::timeout);
    }
    if (broken_)
      throw *broken_;
  }

  /// What the slots of a round have wrong together, by `check` and the
  /// checks every operation has, and its `code` (empty: nothing).
  static std::string verdict_of(const std::vector<slot>& slots,
                                const slot_check& check, errc& code);

  /// Keeps round `round` from being a quick one (start_quickly): its
  /// members that counted themselves in come to the ordinary meeting.
  void close_quick(uint64_t round) noexcept;

  void count_left() {
    left_count_.store(
      static_cast<int>(std::count(left_.begin(), left_.end(), true)));
  }

  // The first cause wins: a member leaving after the others timed out does
  // not hide why they did.
  void break_with(const std::string& why, errc code) {
    if (broken_)
      return;
    broken_ = collective_error("group '" + name_ + "': " + why, code);
    broken_seen_.store(true);
    cv_.notify_all();
  }

  std::string name_;
  int world_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<bool> joined_;
  std::vector<bool> left_;         // joined, then left: the group cannot go on
  std::atomic<int> left_count_{0}; // of left_: read unlocked
  int members_ = 0;
  std::chrono::milliseconds timeout_{30000};
  std::atomic<allreduce_algorithm> algorithm_{allreduce_algorithm::automatic};
  // The round under way.
  std::atomic<uint64_t> generation_{0}; // read unlocked while spinning
  int count_ = 0;
  std::vector<bool> arrived_;
  std::vector<slot> slots_;
  std::string verdict_;
  errc verdict_code_ = errc::mismatch;
  // Set for good once a member failed to come or left mid-operation.
  std::optional<collective_error> broken_;
  std::atomic<bool> broken_seen_{false}; // broken_ is set: read unlocked
  // A member's rounds begun, by rank, each on a cache line of its own: a
  // member counts its own at every operation.
  struct alignas(64) member_rounds {
    uint64_t begun = 0;
  };
  std::vector<member_rounds> rounds_;
  std::vector<std::vector<char>> staging_;
  // The quick rounds (start_quickly): the last one counted, whether it
  // was closed to them, and how many members are in, in one word; and the
  // members' slots by the round's parity, as staging_ keeps their copies.
  alignas(64) std::atomic<uint64_t> quick_{0};
  std::vector<slot> quick_slots_[2];
  alignas(64) std::unique_ptr<threads_hub> hub_;
};

} // namespace lumen::collective::detail
