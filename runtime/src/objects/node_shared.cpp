#include "lumen/node_shared.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "lumen/errors.hpp"

#include "core/log.hpp"

namespace lumen {

namespace {

// The block's first bytes. `ready` is set last, after the contents: a
// block whose maker died before it reads as not ready.
struct header {
  uint64_t magic;
  uint64_t size;
  std::atomic<uint32_t> ready;
};

constexpr uint64_t block_magic = 0x4b4c424e4d554c; // "LUMNBLK"
constexpr size_t data_offset = 64;                 // keeps the data aligned
static_assert(sizeof(header) <= data_offset);

// How long a process waits for another to finish making a block.
constexpr auto make_deadline = std::chrono::minutes(5);

std::string system_error(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

void check_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 200 && name[0] != '.';
  for (char c : name)
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                c == '-' || c == '_');
  if (!ok)
    throw usage_error("'" + name +
                      "' is no name for a node-shared block: use 1 to 200 "
                      "letters, digits and .-_, not starting with a dot");
}

/// The same file as the one `path` names now (not one made since).
bool still_named(int fd, const std::string& path) {
  struct stat a {
  }, b{};
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 &&
         a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

} // namespace

shared_block::~shared_block() {
  if (fd_ < 0)
    return;
  if (map_ != nullptr)
    ::munmap(map_, map_size_);
  // Whoever gets the lock alone is the last to use the block: it goes.
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0 && still_named(fd_, path_))
    ::unlink(path_.c_str());
  ::close(fd_);
}

void detail::reclaim_unmapped_blocks() noexcept {
  auto prefix = "lumen." + std::to_string(::getuid()) + ".";
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr)
    return;
  size_t blocks = 0, bytes = 0;
  while (auto* e = ::readdir(dir)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0)
      continue;
    auto path = std::string{"/dev/shm/"} + e->d_name;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    // Every process that maps a block holds a lock on it until it lets
    // go or dies: no lock, no user.
    struct stat st {};
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && still_named(fd, path) &&
        ::fstat(fd, &st) == 0 && ::unlink(path.c_str()) == 0) {
      ++blocks;
      bytes += static_cast<size_t>(st.st_size);
    }
    ::close(fd);
  }
  ::closedir(dir);
  if (blocks > 0)
    log_line("removed " + std::to_string(blocks) +
             " node-shared block(s) of processes that were killed (" +
             std::to_string(bytes >> 20) + " MiB of /dev/shm)");
}

namespace {

/// Sizes the block being made behind `fd` for `size` bytes, has `fill`
/// write them in place, and marks it ready; throws `error` naming `name`
/// if /dev/shm cannot hold it.
void fill_block(int fd, const std::string& name, size_t size,
                const std::function<void(char* out)>& fill) {
  size_t total = data_offset + size;
  int rc = ::ftruncate(fd, static_cast<off_t>(total)) != 0
             ? errno
             : ::posix_fallocate(fd, 0, static_cast<off_t>(total));
  if (rc != 0) {
    errno = rc;
    throw error(system_error("cannot make the node-shared block '" + name +
                             "' of " + std::to_string(total) +
                             " bytes in /dev/shm (is it full?)"));
  }
  void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    throw error(system_error("cannot map the node-shared block " + name));
  auto* h = new (p) header{block_magic, size, {0}};
  try {
    fill(static_cast<char*>(p) + data_offset);
  } catch (...) {
    ::munmap(p, total);
    throw;
  }
  h->ready.store(1, std::memory_order_release);
  ::munmap(p, total);
}

} // namespace

std::shared_ptr<const shared_block>
node_shared(const std::string& name,
            const std::function<std::vector<char>()>& make) {
  return detail::open_shared_block(name, [&](int fd) {
    auto bytes = make();
    fill_block(fd, name, bytes.size(), [&](char* out) {
      if (!bytes.empty())
        std::memcpy(out, bytes.data(), bytes.size());
    });
    // What `make` built is in the block now; a process with threads
    // would keep the freed memory in its arenas otherwise.
    bytes = std::vector<char>{};
    ::malloc_trim(0);
  });
}

std::shared_ptr<const shared_block>
node_shared(const std::string& name, const std::function<size_t()>& size,
            const std::function<void(char* out)>& fill) {
  return detail::open_shared_block(
    name, [&](int fd) { fill_block(fd, name, size(), fill); });
}

std::shared_ptr<const shared_block>
detail::open_shared_block(const std::string& name,
                          const std::function<void(int fd)>& make) {
  check_name(name);
  std::shared_ptr<shared_block> b{new shared_block};
  b->name_ = name;
  b->path_ = "/dev/shm/lumen." + std::to_string(::getuid()) + "." + name;
  auto deadline = std::chrono::steady_clock::now() + make_deadline;
  for (;;) {
    int fd =
      ::open(b->path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      // Ours to make; the exclusive lock holds off those who map it.
      b->fd_ = fd;
      b->made_here_ = true;
      ::flock(fd, LOCK_EX);
      try {
        make(fd);
      } catch (...) {
        ::unlink(b->path_.c_str());
        throw;
      }
      ::flock(fd, LOCK_SH); // let the others in
    } else if (errno != EEXIST) {
      throw error(system_error("cannot open the node-shared block " + name));
    } else {
      fd = ::open(b->path_.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        if (errno == ENOENT)
          continue; // its last user just removed it: make it anew
        throw error(system_error("cannot open the node-shared block " + name));
      }
      // A shared lock waits out the maker.
      while (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
        if (std::chrono::steady_clock::now() > deadline) {
          ::close(fd);
          throw error("gave up waiting for another process to make the "
                      "node-shared block '" +
                        name + "'",
                      errc::timeout);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      b->fd_ = fd;
    }
    struct stat st {};
    ::fstat(b->fd_, &st);
    auto total = static_cast<size_t>(st.st_size);
    void* p = total >= data_offset
                ? ::mmap(nullptr, total, PROT_READ, MAP_SHARED | MAP_POPULATE,
                         b->fd_, 0)
                : MAP_FAILED;
    auto* h = p == MAP_FAILED ? nullptr : static_cast<const header*>(p);
    if (h != nullptr && h->magic == block_magic &&
        h->ready.load(std::memory_order_acquire) == 1 &&
        h->size == total - data_offset) {
      b->map_ = p;
      b->map_size_ = total;
      b->data_ = static_cast<const char*>(p) + data_offset;
      b->size_ = h->size;
      return b;
    }
    // Its maker died half way: remove the remains (unless someone already
    // did and made it anew) and try again.
    if (p != MAP_FAILED)
      ::munmap(p, total);
    if (still_named(b->fd_, b->path_))
      ::unlink(b->path_.c_str());
    ::close(b->fd_);
    b->fd_ = -1;
    b->made_here_ = false;
  }
}

} // namespace lumen
