#pragma once

// Large blocks between two processes of one host go through shared memory
// instead of the socket. On loopback the kernel copies every byte twice
// (into the socket, out of it), each copy on one core; through an arena a
// block is copied once, by its sender, and read where it lies by its
// receiver. An answer whose caller named a landing in its own arena
// (lumen::landing_buffer) is copied by the answering process straight to
// that landing: a sharded server's client then gets its shards' answers
// side by side without touching them.
//
// Each process has one arena, an anonymous memory file (memfd) that lives
// while the process or a mapping of it does, so that a killed process
// leaves nothing behind. A peer maps it through /proc/<pid>/fd/<fd>, which
// the link's first frame (kind `arena`, data_plane.hpp) names with a
// random cookie. A peer on another host or in another pid namespace finds
// no such file or another cookie, and one in another network namespace
// counts as another host: the link then carries every byte.
// A block's slot starts with a flag its holder clears when done (the
// receiver of a block, the owner of a landing); the arena reuses cleared
// slots, lowest first, and a block that finds no room goes on the socket.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "transport/data_plane.hpp"

namespace lumen::detail {

class shared_arena : public std::enable_shared_from_this<shared_arena> {
public:
  /// Address space an arena takes; its pages are taken as slots first
  /// reach them, and the unused top given back.
  static constexpr size_t size = size_t{1} << 30;

  /// Blocks smaller than this go on the socket, where a copy costs less
  /// than a slot's bookkeeping.
  static constexpr size_t smallest_block = size_t{256} << 10;

  /// This process's arena, made on first use; null where shared memory is
  /// not to be had or LUMEN_SHARED_MEMORY=0.
  static std::shared_ptr<shared_arena> own();

  /// The arena of the peer that sent `offer` (its offer()), mapped once
  /// per process; null if it is not on this host or not the one offered.
  static std::shared_ptr<shared_arena> peer(const bytes& offer);

  ~shared_arena();

  shared_arena(const shared_arena&) = delete;
  shared_arena& operator=(const shared_arena&) = delete;

  /// Keeps `held` (a landing's owner) for a second: a peer on this host
  /// may still be writing there after the link to it failed, until its
  /// end sees the link closed. Lets go of those kept long enough (all
  /// this does, for a null `held`).
  static void keep_a_while(std::shared_ptr<void> held);

  /// What a peer needs to map this arena.
  const bytes& offer() const noexcept {
    return offer_;
  }

  // This process's arena:

  /// Copies `block` into a slot; returns where it starts, or nothing when
  /// there is no room. The receiver gives the slot back.
  std::optional<uint64_t> put(byte_span block);

  /// A slot of `n` bytes that the returned pointer holds until it ends,
  /// or null when there is no room.
  std::shared_ptr<char> buffer(size_t n);

  /// Where `[at, at + n)` starts in this arena, if it lies inside.
  std::optional<uint64_t> offset_of(const char* at, size_t n) const noexcept;

  // A peer's arena:

  /// The peer's block of `n` bytes at `offset`, read in place, its owner
  /// giving the slot back when it ends; size 0 if it is not inside.
  landing view(uint64_t offset, uint64_t n);

  /// The `n` bytes at `offset`, where a peer's landing asks its answer to
  /// be written; null if they are not inside.
  char* place(uint64_t offset, uint64_t n) noexcept;

private:
  shared_arena(int fd, char* base, bytes offer);

  static std::shared_ptr<shared_arena> make();

  std::optional<uint64_t> take(uint64_t n);
  /// Holds the slot whose block starts at `at` until it ends.
  std::shared_ptr<char> holder(char* at);
  void reclaim();

  int fd_;
  char* base_;
  bytes offer_;
  std::mutex mtx_; // the slots of this process's arena
  // Slots not yet given back, by offset: (offset, length).
  std::vector<std::pair<uint64_t, uint64_t>> held_;
  uint64_t reserved_ = 0; // bytes backed by pages
};

/// What lumen::shared_memory_counts_now reports, counted as it happens.
struct shared_memory_counters {
  std::atomic<uint64_t> blocks_sent{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> answers_landed{0};
};

shared_memory_counters& shared_memory_counted();

} // namespace lumen::detail
