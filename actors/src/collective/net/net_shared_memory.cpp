#include "collective/net/net_shared.hpp"

// The segment's memory: made by rank 0 and mapped by every member, its
// layout, and the pages a member takes from /dev/shm as it needs them.

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "lumen/util/reserve_pages.hpp"

namespace lumen::collective::detail {

namespace {

/// Cores this process may run on.
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0)
    return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void* map_segment(int fd, size_t bytes) {
  auto p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_NORESERVE, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

} // namespace

std::unique_ptr<host_segment> host_segment::open(net_links& links) {
  int world = links.world(), rank = links.rank();
  auto bytes = segment_bytes(world);
  char name[64] = {};
  void* map = nullptr;
  int fd = -1;
  uint8_t all_ok = 0;
  if (rank == 0) {
    bool local = true;
    for (int p = 1; p < world; ++p)
      local = local && links.is_loopback(p);
    if (local) {
      std::snprintf(
        name, sizeof name, "/lumen-collective-%d-%016llx",
        static_cast<int>(::getpid()),
        static_cast<unsigned long long>(std::random_device{}()) ^
          static_cast<unsigned long long>(
            std::chrono::steady_clock::now().time_since_epoch().count()));
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

bool host_segment::reserve(reserved_part& part, size_t end) {
  auto at = region(rank_) - static_cast<char*>(map_) + part.base;
  return util::reserve_pages(fd_, uint64_t(at), part.reserved, end);
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

void host_segment::wait_read(const char* place) {
  auto at = static_cast<size_t>(place - region(rank_));
  for (auto& k : kept_)
    if (k.begin == at) {
      wait_done(k.seq);
      return;
    }
}

void host_segment::release(const char* place) noexcept {
  auto at = reinterpret_cast<uintptr_t>(place) -
            reinterpret_cast<uintptr_t>(region(rank_));
  kept_.erase(std::remove_if(kept_.begin(), kept_.end(),
                             [&](const used& k) { return k.begin == at; }),
              kept_.end());
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
} // namespace lumen::collective::detail
