#include "objects/shared_arena.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <new>
#include <random>
#include <string>

#include "lumen/reply_landing.hpp"
#include "lumen/util/reserve_pages.hpp"

namespace lumen::detail {

namespace {

constexpr char arena_magic[8] = {'L', 'M', 'N', 'A', 'R', 'E', 'N', '1'};
constexpr size_t cookie_size = 16;
constexpr uint64_t header_size = 4096; // magic and cookie, then the slots
// A slot: its flag, then the block, 64-aligned for any element type.
constexpr uint64_t slot_header = 64;
constexpr uint32_t slot_held = 1;
// Pages above the highest slot in use that are kept for the next blocks;
// past that, they go back to the system.
constexpr uint64_t kept_above = uint64_t{256} << 20;

std::atomic<uint32_t>* flag_at(char* slot) {
  return std::launder(reinterpret_cast<std::atomic<uint32_t>*>(slot));
}

char* map_file(int fd) {
  void* p = ::mmap(nullptr, shared_arena::size, PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

bool disabled() {
  const char* off = std::getenv("LUMEN_SHARED_MEMORY");
  return off != nullptr && std::strcmp(off, "0") == 0;
}

} // namespace

shared_arena::shared_arena(int fd, char* base, bytes offer)
  : fd_(fd)
  , base_(base)
  , offer_(std::move(offer))
  , reserved_(header_size) {}

shared_arena::~shared_arena() {
  ::munmap(base_, size);
  ::close(fd_);
}

std::shared_ptr<shared_arena> shared_arena::make() {
  int fd = ::memfd_create("lumen-arena", MFD_CLOEXEC);
  if (fd < 0)
    return nullptr;
  char* base = nullptr;
  if (::ftruncate(fd, static_cast<off_t>(shared_arena::size)) != 0 ||
      ::posix_fallocate(fd, 0, header_size) != 0 ||
      (base = map_file(fd)) == nullptr) {
    ::close(fd);
    return nullptr;
  }
  std::random_device entropy;
  char cookie[cookie_size];
  for (size_t i = 0; i < cookie_size; i += sizeof(uint32_t)) {
    auto x = static_cast<uint32_t>(entropy());
    std::memcpy(cookie + i, &x, sizeof(x));
  }
  std::memcpy(base, arena_magic, sizeof(arena_magic));
  std::memcpy(base + sizeof(arena_magic), cookie, cookie_size);
  bytes offer(2 * sizeof(uint32_t) + cookie_size);
  auto pid = static_cast<uint32_t>(::getpid());
  auto number = static_cast<uint32_t>(fd);
  std::memcpy(offer.data(), &pid, sizeof(pid));
  std::memcpy(offer.data() + sizeof(pid), &number, sizeof(number));
  std::memcpy(offer.data() + 2 * sizeof(uint32_t), cookie, cookie_size);
  return std::shared_ptr<shared_arena>{
    new shared_arena(fd, base, std::move(offer))};
}

std::shared_ptr<shared_arena> shared_arena::own() {
  if (disabled())
    return nullptr;
  // Never destroyed: slots held at exit come back to it. A child forked
  // without exec makes its own, leaving its parent's alone.
  static std::mutex mtx;
  static auto* made = new std::shared_ptr<shared_arena>;
  static pid_t made_by = 0;
  std::lock_guard<std::mutex> guard{mtx};
  if (made_by != ::getpid()) {
    *made = make();
    made_by = ::getpid();
  }
  return *made;
}

std::shared_ptr<shared_arena> shared_arena::peer(const bytes& offer) {
  if (offer.size() != 2 * sizeof(uint32_t) + cookie_size || disabled())
    return nullptr;
  static std::mutex mtx;
  static std::map<bytes, std::weak_ptr<shared_arena>> mapped;
  std::lock_guard<std::mutex> guard{mtx};
  for (auto i = mapped.begin(); i != mapped.end();)
    i = i->second.expired() ? mapped.erase(i) : std::next(i);
  if (auto i = mapped.find(offer); i != mapped.end())
    return i->second.lock();
  uint32_t pid = 0, number = 0;
  std::memcpy(&pid, offer.data(), sizeof(pid));
  std::memcpy(&number, offer.data() + sizeof(pid), sizeof(number));
  auto proc = "/proc/" + std::to_string(pid);
  // A peer in another network namespace counts as another host (the
  // multi-host tests' hosts are such namespaces): its blocks stay on the
  // link, which may be cut.
  struct stat ours {
  }, theirs{};
  if (::stat("/proc/self/ns/net", &ours) != 0 ||
      ::stat((proc + "/ns/net").c_str(), &theirs) != 0 ||
      ours.st_ino != theirs.st_ino || ours.st_dev != theirs.st_dev)
    return nullptr;
  int fd = ::open((proc + "/fd/" + std::to_string(number)).c_str(),
                  O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return nullptr; // another host's, or gone
  struct stat st {};
  char* base = nullptr;
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != size ||
      (base = map_file(fd)) == nullptr) {
    ::close(fd);
    return nullptr;
  }
  std::shared_ptr<shared_arena> a{new shared_arena(fd, base, offer)};
  if (std::memcmp(base, arena_magic, sizeof(arena_magic)) != 0 ||
      std::memcmp(base + sizeof(arena_magic),
                  offer.data() + 2 * sizeof(uint32_t), cookie_size) != 0)
    return nullptr;
  mapped[offer] = a;
  return a;
}

void shared_arena::keep_a_while(std::shared_ptr<void> held) {
  using clock = std::chrono::steady_clock;
  static std::mutex mtx;
  static std::deque<std::pair<clock::time_point, std::shared_ptr<void>>> kept;
  std::deque<std::pair<clock::time_point, std::shared_ptr<void>>> done;
  std::lock_guard<std::mutex> guard{mtx};
  auto now = clock::now();
  while (!kept.empty() && kept.front().first <= now) {
    done.push_back(std::move(kept.front()));
    kept.pop_front();
  }
  if (held)
    kept.emplace_back(now + std::chrono::seconds(1), std::move(held));
}

void shared_arena::reclaim() {
  auto given_back = [&](const std::pair<uint64_t, uint64_t>& s) {
    return flag_at(base_ + s.first)->load(std::memory_order_acquire) !=
           slot_held;
  };
  held_.erase(std::remove_if(held_.begin(), held_.end(), given_back),
              held_.end());
  uint64_t top =
    held_.empty() ? header_size : held_.back().first + held_.back().second;
  if (reserved_ - top > kept_above &&
      ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  static_cast<off_t>(top + kept_above),
                  static_cast<off_t>(reserved_ - top - kept_above)) == 0)
    reserved_ = top + kept_above;
}

std::optional<uint64_t> shared_arena::take(uint64_t n) {
  uint64_t need = slot_header + (n + 63) / 64 * 64;
  std::lock_guard<std::mutex> guard{mtx_};
  reclaim();
  // The lowest gap that fits: the pages in use stay few and warm.
  uint64_t at = header_size;
  auto next = held_.begin();
  for (; next != held_.end() && next->first - at < need; ++next)
    at = next->first + next->second;
  if (need > size - at || !util::reserve_pages(fd_, 0, reserved_, at + need))
    return std::nullopt;
  new (base_ + at) std::atomic<uint32_t>{slot_held};
  held_.insert(next, {at, need});
  return at + slot_header;
}

std::optional<uint64_t> shared_arena::put(byte_span block) {
  auto at = take(block.size);
  if (at)
    std::memcpy(base_ + *at, block.data, block.size);
  return at;
}

std::shared_ptr<char> shared_arena::holder(char* at) {
  auto* flag = flag_at(at - slot_header);
  return {at, [self = shared_from_this(), flag](char*) {
            flag->store(0, std::memory_order_release);
          }};
}

std::shared_ptr<char> shared_arena::buffer(size_t n) {
  auto at = take(n);
  return at ? holder(base_ + *at) : nullptr;
}

std::optional<uint64_t> shared_arena::offset_of(const char* at,
                                                size_t n) const noexcept {
  if (at < base_ + header_size || at > base_ + size ||
      n > static_cast<size_t>(base_ + size - at))
    return std::nullopt;
  return static_cast<uint64_t>(at - base_);
}

landing shared_arena::view(uint64_t offset, uint64_t n) {
  if (offset < header_size + slot_header || offset % 64 != 0 || n == 0 ||
      offset > size || n > size - offset)
    return {};
  char* at = base_ + offset;
  return {at, static_cast<size_t>(n), holder(at)};
}

char* shared_arena::place(uint64_t offset, uint64_t n) noexcept {
  if (offset < header_size || offset > size || n > size - offset)
    return nullptr;
  return base_ + offset;
}

shared_memory_counters& shared_memory_counted() {
  static shared_memory_counters counted;
  return counted;
}

} // namespace lumen::detail

namespace lumen {

shared_memory_counts shared_memory_counts_now() {
  auto& c = detail::shared_memory_counted();
  return {c.blocks_sent.load(std::memory_order_relaxed),
          c.bytes_sent.load(std::memory_order_relaxed),
          c.answers_landed.load(std::memory_order_relaxed)};
}

std::shared_ptr<char> landing_buffer(size_t size) {
  detail::shared_arena::keep_a_while(nullptr); // lets go of those kept enough
  if (auto arena = detail::shared_arena::own();
      arena && size >= detail::shared_arena::smallest_block)
    if (auto b = arena->buffer(size))
      return b;
  // Aligned as the arena's slots are, for any element type.
  constexpr std::align_val_t align{64};
  return {static_cast<char*>(::operator new(size, align)),
          [](char* p) { ::operator delete(p, align); }};
}

} // namespace lumen
