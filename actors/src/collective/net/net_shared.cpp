#include "collective/net/net_shared.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "collective/reduce.hpp"

namespace lumen::collective::detail {

namespace {

using clock = std::chrono::steady_clock;

/// Descriptors a member keeps: it starts operation k only once everyone
/// is done with k - ring_ops, whose descriptor k's takes the place of.
constexpr uint64_t ring_ops = 64;

/// How long a waiting member spins before it sleeps, and how long it
/// sleeps at most before it looks at its channels again.
constexpr auto spin_time = std::chrono::microseconds(50);
constexpr timespec nap{0, 2'000'000};

/// From this size on an operation of three members or more is split into
/// shares: reading N copies whole costs each core more than a second
/// meeting. Not of two: each core reads the other's copy whole either
/// way, and the trainer's two workers, whose 940 KB gradient the halves
/// took from 60-72 to 39 us alone, stepped slower with them (1.10-1.26x
/// their ceiling whole, 1.28-1.38x in halves, three runs in turn).
constexpr size_t split_from = size_t{128} << 10;

/// Member `rank`'s share of `numel` elements of `size` bytes among
/// `world`, in elements: shares start on cache lines, so that no two
/// members write one.
std::pair<size_t, size_t> share(size_t numel, size_t size, int world,
                                int rank) {
  auto line = std::max<size_t>(1, 64 / size);
  auto at = [&](int r) {
    return std::min(numel, numel * static_cast<size_t>(r) /
                             static_cast<size_t>(world) / line * line);
  };
  return {at(rank), rank + 1 == world ? numel : at(rank + 1)};
}

long futex(std::atomic<uint32_t>* word, int op, uint32_t value,
           const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value,
                   timeout, nullptr, 0);
}

} // namespace

struct host_segment::descriptor {
  uint64_t seq;
  uint64_t offset;
  uint64_t share; // split: where the member puts its reduced share
  uint64_t numel;
  uint32_t type;
  uint32_t op;
  char site[48]; // where the member called allreduce_start
  uint64_t call; // as which of its operations in the group
};

struct alignas(64) host_segment::member_state {
  std::atomic<uint64_t> published; // the last operation whose data are in
  std::atomic<uint64_t> shared;    // split: the last whose share is in
  std::atomic<uint64_t> done;      // the last operation it reduced
  alignas(64) descriptor ops[ring_ops];
};

/// The segment's first page: a doorbell that every publish and every
/// finish rings, and how many members sleep on it.
struct alignas(64) doorbell {
  std::atomic<uint32_t> rings;
  std::atomic<uint32_t> sleepers;
};

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                std::atomic<uint32_t>::is_always_lock_free,
              "the segment's counters are shared between processes");

namespace {

/// True if `behind(q)` holds for no member q of the `world`.
template <class Behind>
bool none_behind(int world, Behind behind) {
  for (int q = 0; q < world; ++q)
    if (behind(q))
      return false;
  return true;
}

} // namespace

host_segment::member_state& host_segment::state(int rank) const noexcept {
  static_assert(sizeof(member_state) <= state_bytes,
                "a member's state in its pages");
  auto base = static_cast<char*>(map_) + page;
  return *reinterpret_cast<member_state*>(base + static_cast<size_t>(rank) *
                                                   state_bytes);
}

void host_segment::ring() noexcept {
  auto& bell = *static_cast<doorbell*>(map_);
  bell.rings.fetch_add(1);
  if (bell.sleepers.load() > 0)
    futex(&bell.rings, FUTEX_WAKE, INT32_MAX, nullptr);
}

template <class Behind>
void host_segment::wait_for(Behind behind, const char* what) {
  auto ready = [&] { return none_behind(world_, behind); };
  auto start = clock::now();
  if (util::spin_until(ready, start + spin_time, pause_))
    return;
  auto& bell = *static_cast<doorbell*>(map_);
  auto deadline = start + links_.timeout();
  for (;;) {
    // A peer that died or broke the group says so on its channel.
    for (int p = 0; p < world_; ++p)
      if (p != rank_)
        links_.watch_peer(p, doing);
    auto rung = bell.rings.load();
    bell.sleepers.fetch_add(1);
    if (!ready())
      futex(&bell.rings, FUTEX_WAIT, rung, &nap);
    bell.sleepers.fetch_sub(1);
    if (ready())
      return;
    if (clock::now() > deadline) {
      std::string late;
      for (int q = 0; q < world_; ++q)
        if (behind(q))
          late += (late.empty() ? "" : ", ") + std::to_string(q);
      links_.fail("group '" + links_.group() + "': rank " +
                    std::to_string(rank_) + " waited " +
                    std::to_string(links_.timeout().count()) + " ms for rank " +
                    late + " to " + what +
                    "; is it stopped, or calling another collective?",
                  errc::timeout);
    }
  }
}

uint64_t host_segment::start(const char* in, char* out, ml::dtype type,
                             size_t numel, reduce_op op, const call_site& site,
                             uint64_t call) {
  if (auto cause = links_.broken(); !cause.empty())
    links_.fail(cause);
  auto bytes = numel * ml::size_of(type);
  auto seq = started_ + 1;
  // A descriptor's place is free once every member is done with the
  // operation ring_ops before.
  if (seq > ring_ops)
    wait_done(seq - ring_ops);
  // Where `in` is in the kept part, the numbers say; comparing pointers
  // into other objects would not.
  auto at = reinterpret_cast<uintptr_t>(in) -
            reinterpret_cast<uintptr_t>(region(rank_));
  auto kept = in == out
                ? kept_.end()
                : std::find_if(kept_.begin(), kept_.end(), [&](const used& k) {
                    return at >= k.begin && at + bytes <= k.end;
                  });
  if (kept != kept_.end())
    kept->seq = seq; // the place is read until seq is done
  size_t offset = at;
  if (kept == kept_.end()) {
    offset = kept_bytes + place_for(bytes, seq);
    if (bytes > 0)
      std::memcpy(region(rank_) + offset, in, bytes);
  }
  uint64_t share_at = 0;
  if (split(bytes)) {
    auto [b, e] = share(numel, ml::size_of(type), world_, rank_);
    share_at = kept_bytes + place_for((e - b) * ml::size_of(type), seq);
  }
  auto& me = state(rank_);
  auto& d = me.ops[seq % ring_ops];
  d = {seq,
       offset,
       share_at,
       numel,
       static_cast<uint32_t>(type),
       static_cast<uint32_t>(op),
       {},
       call};
  call_site_text(site, d.site);
  me.published.store(seq, std::memory_order_release);
  ring();
  started_ = seq;
  pending_.push_back({seq, out, type, numel, op, call});
  return seq;
}

bool host_segment::split(size_t bytes) const noexcept {
  return world_ > 2 && bytes >= split_from;
}

size_t host_segment::place_for(size_t bytes, uint64_t seq) {
  // A place's bytes are free once every member is done with the
  // operations that used them. The lowest free place is taken, so that a
  // training step reuses the last one's bytes, still in the cache, rather
  // than walking through the whole region.
  size_t begin = 0;
  for (;;) {
    forget_done();
    begin = 0;
    for (auto& u : used_) // by place
      if (begin + bytes > u.begin && u.end > begin)
        begin = u.end;
    if (begin + bytes <= region_bytes && reserve(copy_pages_, begin + bytes))
      break;
    if (used_.empty())
      no_room_for(bytes);
    wait_done(std::min_element(
                used_.begin(), used_.end(),
                [](const used& a, const used& b) { return a.seq < b.seq; })
                ->seq); // the oldest, wherever it is
  }
  used_.insert(
    std::upper_bound(used_.begin(), used_.end(), begin,
                     [](size_t b, const used& u) { return b < u.begin; }),
    {seq, begin, begin + bytes});
  return begin;
}

uint64_t host_segment::all_done() const noexcept {
  auto least = started_;
  for (int p = 0; p < world_; ++p)
    least = std::min(least, state(p).done.load(std::memory_order_acquire));
  return least;
}

void host_segment::forget_done() {
  auto least = all_done();
  used_.erase(std::remove_if(used_.begin(), used_.end(),
                             [&](const used& u) { return u.seq <= least; }),
              used_.end());
}

void host_segment::wait_done(uint64_t seq) {
  if (all_done() >= seq)
    return;
  progress(seq, true);
  wait_for(
    [&](int q) { return state(q).done.load(std::memory_order_acquire) < seq; },
    "finish the all-reduces before");
}

bool host_segment::progress(uint64_t seq, bool block) {
  while (done_ < seq) {
    if (auto cause = links_.broken(); !cause.empty())
      links_.fail(cause);
    auto& p = pending_.front();
    if (p.own_share) { // split, and this member's share is in
      if (!gather(p, block))
        return false;
      finish_front();
      continue;
    }
    if (!all_reached(&member_state::published, p.seq, block,
                     "start the same all-reduce"))
      return false;
    copies_.resize(static_cast<size_t>(world_));
    for (int q = 0; q < world_; ++q) {
      auto& d = state(q).ops[p.seq % ring_ops];
      if (d.seq != p.seq || d.numel != p.numel ||
          d.type != static_cast<uint32_t>(p.type) ||
          d.op != static_cast<uint32_t>(p.op))
        links_.fail(
          "group '" + links_.group() + "': rank " + std::to_string(q) +
            " started an all-reduce of " + std::to_string(d.numel) + " " +
            ml::to_string(static_cast<ml::dtype>(d.type)) + " elements (" +
            to_string(static_cast<reduce_op>(d.op)) + "), rank " +
            std::to_string(rank_) + " of " + std::to_string(p.numel) + " " +
            ml::to_string(p.type) + " elements (" + to_string(p.op) +
            "); every member must start the same all-reduces in the same "
            "order; " +
            called_at(q, d.site, d.call) + ", " +
            called_at(rank_, state(rank_).ops[p.seq % ring_ops].site, p.call),
          errc::mismatch);
      copies_[static_cast<size_t>(q)] = region(q) + d.offset;
    }
    reduce(p);
    if (!p.own_share)
      finish_front();
  }
  return true;
}

void host_segment::reduce(pending& p) {
  auto size = ml::size_of(p.type);
  if (!split(p.numel * size)) {
    reduce_in_rank_order(copies_, p.out, p.type, p.numel, p.op);
    return;
  }
  auto [b, e] = share(p.numel, size, world_, rank_);
  for (auto& c : copies_) // made anew for each operation
    c += b * size;
  reduce_in_rank_order(copies_, p.out + b * size, p.type, e - b, p.op);
  // Copied rather than reduced there too: a copy writes whole lines
  // without fetching them back from the cores that read the last
  // operation's share from the same place.
  auto& me = state(rank_);
  std::memcpy(region(rank_) + me.ops[p.seq % ring_ops].share, p.out + b * size,
              (e - b) * size);
  p.own_share = true;
  me.shared.store(p.seq, std::memory_order_release);
  ring();
}

bool host_segment::all_reached(std::atomic<uint64_t> member_state::*counter,
                               uint64_t seq, bool block, const char* what) {
  auto behind = [&](int q) {
    return (state(q).*counter).load(std::memory_order_acquire) < seq;
  };
  if (none_behind(world_, behind))
    return true;
  if (!block)
    return false;
  wait_for(behind, what);
  return true;
}

bool host_segment::gather(const pending& p, bool block) {
  if (!all_reached(&member_state::shared, p.seq, block,
                   "reduce its share of the same all-reduce"))
    return false;
  auto size = ml::size_of(p.type);
  for (int q = 0; q < world_; ++q) {
    if (q == rank_)
      continue;
    auto [b, e] = share(p.numel, size, world_, q);
    std::memcpy(p.out + b * size,
                region(q) + state(q).ops[p.seq % ring_ops].share,
                (e - b) * size);
  }
  return true;
}

void host_segment::finish_front() {
  done_ = pending_.front().seq;
  pending_.pop_front();
  state(rank_).done.store(done_, std::memory_order_release);
  ring();
}

} // namespace lumen::collective::detail
