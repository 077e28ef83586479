#include "lumen/detail/small_pool.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <vector>

// Each thread has a heap: per size class, a list of free blocks only it
// touches, and a list other threads push the blocks they free onto (a
// lock-free stack that the owner only ever empties whole, so a push never
// races a pop of one block). A block's header names its heap and class.
// A thread that ends leaves its heap for the next new thread to adopt:
// blocks of it still held elsewhere come home to a heap that lives on.
//
// Under AddressSanitizer every block is a plain new/delete, so that a use
// after free is still caught rather than hidden in a recycled block.

namespace lumen::detail {

#if defined(__SANITIZE_ADDRESS__)

void* pool_allocate(size_t bytes) {
  return ::operator new(bytes);
}

void pool_deallocate(void* p, size_t) noexcept {
  ::operator delete(p);
}

#else

namespace {

constexpr size_t granule = 64;
constexpr size_t classes = 8; // blocks of 64 to 512 bytes, header included
constexpr size_t header_bytes = alignof(std::max_align_t);
// Blocks a heap's own thread frees and keeps per class; beyond, they go
// back to malloc. (Blocks other threads give back are all kept: they are
// the working set of a thread whose calls run elsewhere.)
constexpr size_t kept = 4096;

struct free_block {
  free_block* next;
};

struct heap;

struct alignas(std::max_align_t) header {
  heap* owner; // null: the block came from malloc, outside any heap
  size_t cls;
};
static_assert(sizeof(header) == header_bytes, "a header keeps blocks aligned");

struct heap {
  struct bin {
    free_block* local = nullptr;
    size_t count = 0;
    std::atomic<free_block*> remote{nullptr};
  };
  bin bins[classes];
};

// Never destroyed: heaps outlive every thread, and blocks may come home
// during exit.
std::mutex& orphans_mutex() {
  static auto* m = new std::mutex;
  return *m;
}

std::vector<heap*>& orphans() {
  static auto* v = new std::vector<heap*>;
  return *v;
}

thread_local heap* current = nullptr;
thread_local bool exiting = false;

/// Blocks this thread freed for another heap, sent home together: one
/// atomic exchange per batch rather than a contended one per block.
struct going_home {
  heap* owner = nullptr;
  free_block* first = nullptr;
  free_block* last = nullptr;
  size_t count = 0;
};
constexpr size_t batch = 32;
thread_local going_home outbox[classes];

void send_home(size_t cls) noexcept {
  auto& out = outbox[cls];
  if (out.count == 0)
    return;
  auto& remote = out.owner->bins[cls].remote;
  auto* top = remote.load(std::memory_order_relaxed);
  do {
    out.last->next = top;
  } while (!remote.compare_exchange_weak(
    top, out.first, std::memory_order_release, std::memory_order_relaxed));
  out = going_home{};
}

/// Sends the thread's outbox home and leaves its heap to the next thread
/// when the thread ends. Armed by a thread's first allocation or first
/// free for another heap; the state above is plain data, so that frees
/// during the thread's exit, after this ran, still find it.
struct heap_release {
  bool armed = false;
  ~heap_release() {
    exiting = true;
    if (!armed)
      return;
    for (size_t cls = 0; cls < classes; ++cls)
      send_home(cls);
    if (current == nullptr)
      return;
    std::lock_guard<std::mutex> guard{orphans_mutex()};
    orphans().push_back(current);
    current = nullptr;
  }
};

thread_local heap_release release;
thread_local bool armed = false;

void arm() noexcept {
  if (!armed && !exiting) {
    armed = true;
    release.armed = true;
  }
}

heap* my_heap() {
  if (current != nullptr || exiting)
    return current;
  arm();
  std::lock_guard<std::mutex> guard{orphans_mutex()};
  if (orphans().empty()) {
    current = new heap;
  } else {
    current = orphans().back();
    orphans().pop_back();
  }
  return current;
}

void* from_malloc(size_t bytes, heap* owner, size_t cls) {
  auto* h = static_cast<header*>(std::malloc(header_bytes + bytes));
  if (h == nullptr)
    throw std::bad_alloc{};
  h->owner = owner;
  h->cls = cls;
  return reinterpret_cast<char*>(h) + header_bytes;
}

header* header_of(void* p) noexcept {
  return reinterpret_cast<header*>(static_cast<char*>(p) - header_bytes);
}

} // namespace

void* pool_allocate(size_t bytes) {
  auto cls = (bytes + header_bytes - 1) / granule;
  auto* h = cls < classes ? my_heap() : nullptr;
  if (h == nullptr)
    return from_malloc(bytes, nullptr, 0);
  auto& bin = h->bins[cls];
  if (bin.local == nullptr) {
    // What other threads gave back since the local list ran dry (not
    // counted: walking a long list costs a cache miss a block).
    bin.local = bin.remote.exchange(nullptr, std::memory_order_acquire);
    bin.count = 0;
  }
  if (bin.local == nullptr)
    return from_malloc((cls + 1) * granule - header_bytes, h, cls);
  auto* b = bin.local;
  bin.local = b->next;
  if (bin.count > 0)
    --bin.count;
  return b;
}

void pool_deallocate(void* p, size_t) noexcept {
  if (p == nullptr)
    return;
  auto* hd = header_of(p);
  auto* owner = hd->owner;
  if (owner == nullptr) {
    std::free(hd);
    return;
  }
  auto* b = static_cast<free_block*>(p);
  auto& bin = owner->bins[hd->cls];
  if (owner == current) {
    if (bin.count >= kept) {
      std::free(hd);
      return;
    }
    b->next = bin.local;
    bin.local = b;
    ++bin.count;
    return;
  }
  arm();
  auto& out = outbox[hd->cls];
  if (out.owner != owner || exiting) {
    send_home(hd->cls);
    out.owner = owner;
  }
  b->next = out.first;
  out.first = b;
  if (out.last == nullptr)
    out.last = b;
  if (++out.count == batch || exiting)
    send_home(hd->cls);
}

#endif

} // namespace lumen::detail
