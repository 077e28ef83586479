#include "collective/net/net_shared.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

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

constexpr const char* doing = "allreduce_start";

/// Cores this process may run on.
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0)
    return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
  uint64_t numel;
  uint32_t type;
  uint32_t op;
  char site[48]; // where the member called allreduce_start
  uint64_t call; // as which of its operations in the group
};

struct alignas(64) host_segment::member_state {
  std::atomic<uint64_t> published; // the last operation whose data are in
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

constexpr size_t page = 4096;
/// A member's state: its ring of descriptors, each with a call site.
constexpr size_t state_bytes = 2 * page;

/// The doorbell's page, then each member's state.
size_t header_bytes(int world) {
  return page + state_bytes * static_cast<size_t>(world);
}

/// A member's kept part and its places for copies.
constexpr size_t member_bytes =
  host_segment::kept_bytes + host_segment::region_bytes;

size_t segment_bytes_for(int world) {
  return header_bytes(world) + static_cast<size_t>(world) * member_bytes;
}

void* map_segment(int fd, size_t bytes) {
  auto p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_NORESERVE, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

/// True if `behind(q)` holds for no member q of the `world`.
template <class Behind>
bool none_behind(int world, Behind behind) {
  for (int q = 0; q < world; ++q)
    if (behind(q))
      return false;
  return true;
}

} // namespace

std::unique_ptr<host_segment> host_segment::open(net_links& links) {
  static_assert(sizeof(member_state) <= state_bytes,
                "a member's state in its pages");
  int world = links.world(), rank = links.rank();
  auto bytes = segment_bytes_for(world);
  char name[64] = {};
  void* map = nullptr;
  int fd = -1;
  uint8_t all_ok = 0;
  if (rank == 0) {
    bool local = true;
    for (int p = 1; p < world; ++p)
      local = local && links.is_loopback(p);
    if (local) {
      std::snprintf(name, sizeof name, "/lumen-collective-%d-%016llx",
                    static_cast<int>(::getpid()),
                    static_cast<unsigned long long>(std::random_device{}()) ^
                      static_cast<unsigned long long>(
                        clock::now().time_since_epoch().count()));
      fd = ::shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
      // The header's pages up front: every member touches them.
      if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 &&
          ::posix_fallocate(fd, 0, static_cast<off_t>(header_bytes(world))) ==
            0)
        map = map_segment(fd, bytes);
      if (map == nullptr && fd >= 0) {
        ::shm_unlink(name);
        ::close(fd);
        fd = -1;
      }
      if (map == nullptr)
        name[0] = 0;
    }
    for (int p = 1; p < world; ++p)
      links.post_copy(p, frame_kind::data, name, sizeof name);
    all_ok = map != nullptr;
    for (int p = 1; p < world; ++p) {
      uint8_t ok = 0;
      links.read_data(p, &ok, 1, doing);
      all_ok &= ok;
    }
    if (name[0] != 0)
      ::shm_unlink(name); // everyone that maps it did: nothing to leave
    for (int p = 1; p < world; ++p)
      links.post_copy(p, frame_kind::data, &all_ok, 1);
  } else {
    links.read_data(0, name, sizeof name, doing);
    name[sizeof name - 1] = 0;
    if (name[0] != 0 && links.is_loopback(0)) {
      fd = ::shm_open(name, O_RDWR, 0);
      struct stat st {};
      if (fd >= 0 && ::fstat(fd, &st) == 0 &&
          static_cast<size_t>(st.st_size) == bytes)
        map = map_segment(fd, bytes);
      if (map == nullptr && fd >= 0) {
        ::close(fd);
        fd = -1;
      }
    }
    uint8_t ok = map != nullptr;
    links.post_copy(0, frame_kind::data, &ok, 1);
    links.read_data(0, &all_ok, 1, doing);
  }
  if (!all_ok) {
    if (map != nullptr) {
      ::munmap(map, bytes);
      ::close(fd);
    }
    return nullptr;
  }
  return std::unique_ptr<host_segment>{new host_segment(links, fd, map, bytes)};
}

host_segment::host_segment(net_links& links, int fd, void* map, size_t map_size)
  : links_(links)
  , fd_(fd)
  , map_(map)
  , map_size_(map_size)
  , world_(links.world())
  , rank_(links.rank())
  // More members than cores: a member spinning on its core would keep
  // the one it waits for from running (4 KiB took 7x Open MPI's time at
  // N = 3 on 2 cores), so it yields between polls, as Open MPI does
  // oversubscribed.
  , pause_(world_ > usable_cores() ? util::poll_pause::yield
                                   : util::poll_pause::relax) {}

host_segment::~host_segment() {
  ::munmap(map_, map_size_);
  ::close(fd_);
}

// A member's pages are taken before it first writes them, where running
// out of /dev/shm is a return value; taken on first touch, they would be
// a SIGBUS.
bool host_segment::reserve(reserved_part& part, size_t end) {
  if (end <= part.reserved)
    return true;
  auto at = region(rank_) - static_cast<char*>(map_) + part.base;
  if (::posix_fallocate(fd_, static_cast<off_t>(at + part.reserved),
                        static_cast<off_t>(end - part.reserved)) != 0)
    return false;
  part.reserved = end;
  return true;
}

host_segment::member_state& host_segment::state(int rank) const noexcept {
  auto base = static_cast<char*>(map_) + page;
  return *reinterpret_cast<member_state*>(base + static_cast<size_t>(rank) *
                                                   state_bytes);
}

char* host_segment::region(int rank) const noexcept {
  return static_cast<char*>(map_) + header_bytes(world_) +
         static_cast<size_t>(rank) * member_bytes;
}

char* host_segment::keep(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64; // each place on cache lines of its own
  size_t begin = 0;
  for (auto& k : kept_) // by place: the lowest gap that holds it
    if (begin + bytes > k.begin)
      begin = k.end;
    else
      break;
  if (bytes == 0 || begin + bytes > kept_bytes ||
      !reserve(kept_pages_, begin + bytes))
    return nullptr;
  kept_.insert(
    std::upper_bound(kept_.begin(), kept_.end(), begin,
                     [](size_t b, const used& u) { return b < u.begin; }),
    {0, begin, begin + bytes});
  return region(rank_) + begin;
}

void host_segment::release(const char* place) noexcept {
  auto at = reinterpret_cast<uintptr_t>(place) -
            reinterpret_cast<uintptr_t>(region(rank_));
  kept_.erase(std::remove_if(kept_.begin(), kept_.end(),
                             [&](const used& k) { return k.begin == at; }),
              kept_.end());
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
  bool kept =
    in != out && std::any_of(kept_.begin(), kept_.end(), [&](const used& k) {
      return at >= k.begin && at + bytes <= k.end;
    });
  auto offset = kept ? at : kept_bytes + copy_in(in, bytes, seq);
  auto& me = state(rank_);
  auto& d = me.ops[seq % ring_ops];
  d = {
    seq, offset, numel, static_cast<uint32_t>(type), static_cast<uint32_t>(op),
    {},  call};
  call_site_text(site, d.site);
  me.published.store(seq, std::memory_order_release);
  ring();
  started_ = seq;
  pending_.push_back({seq, out, type, numel, op, call});
  return seq;
}

size_t host_segment::copy_in(const char* in, size_t bytes, uint64_t seq) {
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
  if (bytes > 0)
    std::memcpy(region(rank_) + kept_bytes + begin, in, bytes);
  used_.insert(
    std::upper_bound(used_.begin(), used_.end(), begin,
                     [](size_t b, const used& u) { return b < u.begin; }),
    {seq, begin, begin + bytes});
  return begin;
}

void host_segment::no_room_for(size_t bytes) {
  struct statvfs fs {};
  auto free_mib =
    ::statvfs("/dev/shm", &fs) == 0
      ? std::to_string(uint64_t{fs.f_bavail} * fs.f_frsize >> 20) + " MiB"
      : std::string{"no room"};
  links_.fail("group '" + links_.group() + "': rank " + std::to_string(rank_) +
                " cannot copy " + std::to_string(bytes) +
                " bytes into the shared memory where members on one machine "
                "all-reduce: /dev/shm has " +
                free_mib +
                " free; give it more (docker run --shm-size=1g, or mount -o "
                "remount,size=4g /dev/shm)",
              errc::unspecified);
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
    auto p = pending_.front();
    auto not_in = [&](int q) {
      return state(q).published.load(std::memory_order_acquire) < p.seq;
    };
    if (!none_behind(world_, not_in)) {
      if (!block)
        return false;
      wait_for(not_in, "start the same all-reduce");
    }
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
    reduce_in_rank_order(copies_, p.out, p.type, p.numel, p.op);
    done_ = p.seq;
    pending_.pop_front();
    auto& me = state(rank_);
    me.done.store(done_, std::memory_order_release);
    ring();
  }
  return true;
}

} // namespace lumen::collective::detail
