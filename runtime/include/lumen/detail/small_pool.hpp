#pragma once

// Memory for the small objects every task, call and put makes (its
// result's state, the task or call itself). They are made on the caller's
// thread and often freed on another (the actor's, a task worker's), which
// in glibc's malloc makes both threads take the same arena lock for every
// one of them: a third or more of an async call's time. A block here goes
// back to the thread that made it, through a list only that thread takes
// from, and is made again from there without a lock.

#include <cstddef>
#include <memory>
#include <utility>

namespace lumen::detail {

/// `bytes` of memory aligned for any scalar type; blocks past the
/// largest class (496 bytes) come from malloc, and under
/// AddressSanitizer every block is operator new's.
void* pool_allocate(size_t bytes);

/// Gives back what pool_allocate(bytes) returned, from any thread.
void pool_deallocate(void* p, size_t bytes) noexcept;

/// An allocator for std::allocate_shared over pool_allocate.
template <class T>
struct pool_allocator {
  using value_type = T;

  pool_allocator() noexcept = default;
  template <class U>
  pool_allocator(const pool_allocator<U>&) noexcept {}

  T* allocate(size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t),
                  "an over-aligned type does not come from the pool");
    return static_cast<T*>(pool_allocate(n * sizeof(T)));
  }

  void deallocate(T* p, size_t n) noexcept {
    pool_deallocate(p, n * sizeof(T));
  }

  template <class U>
  bool operator==(const pool_allocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const pool_allocator<U>&) const noexcept {
    return false;
  }
};

/// std::make_shared with the object and its count in one pooled block.
template <class T, class... Args>
std::shared_ptr<T> make_pooled(Args&&... args) {
  return std::allocate_shared<T>(pool_allocator<T>{},
                                 std::forward<Args>(args)...);
}

} // namespace lumen::detail
