#define BOOST_TEST_MODULE small_pool
#include <boost/test/unit_test.hpp>

// The pool behind tasks', calls' and puts' small objects: blocks freed on
// another thread come back to the thread that made them, a thread that
// ends leaves its blocks to the next, large blocks and every class are
// aligned, and threads freeing each other's blocks at once corrupt
// nothing. (Under AddressSanitizer the pool is plain new/delete, so the
// reuse cases only assert there what holds for any allocator.)

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <lumen/detail/small_pool.hpp>

namespace {

using lumen::detail::pool_allocate;
using lumen::detail::pool_deallocate;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool pooled = false;
#else
constexpr bool pooled = true;
#endif

constexpr size_t block = 100; // a call's size class

std::set<void*> allocate_n(size_t n, size_t bytes = block) {
  std::set<void*> out;
  for (size_t i = 0; i < n; ++i) {
    auto* p = pool_allocate(bytes);
    std::memset(p, 0x5a, bytes);
    out.insert(p);
  }
  return out;
}

size_t common(const std::set<void*>& a, const std::set<void*>& b) {
  size_t n = 0;
  for (auto* p : a)
    n += b.count(p);
  return n;
}

} // namespace

BOOST_AUTO_TEST_CASE(blocks_freed_on_another_thread_come_home) {
  std::set<void*> first;
  std::thread maker{[&] {
    first = allocate_n(1000);
    // Another thread frees them all, and ends (which sends the last of
    // them home).
    std::thread{[&] {
      for (auto* p : first)
        pool_deallocate(p, block);
    }}.join();
    auto second = allocate_n(1000);
    if (pooled)
      BOOST_TEST(common(first, second) == 1000u);
    for (auto* p : second)
      pool_deallocate(p, block);
  }};
  maker.join();
}

BOOST_AUTO_TEST_CASE(a_thread_that_ends_leaves_its_blocks_to_the_next) {
  std::set<void*> first, second;
  std::thread{[&] {
    first = allocate_n(200);
    for (auto* p : first)
      pool_deallocate(p, block);
  }}.join();
  std::thread{[&] {
    second = allocate_n(200);
    for (auto* p : second)
      pool_deallocate(p, block);
  }}.join();
  if (pooled)
    BOOST_TEST(common(first, second) == 200u);
}

BOOST_AUTO_TEST_CASE(every_size_is_aligned_and_whole) {
  std::vector<std::pair<void*, size_t>> held;
  for (size_t bytes = 1; bytes <= 4096; bytes += 7) {
    auto* p = pool_allocate(bytes);
    BOOST_TEST(reinterpret_cast<uintptr_t>(p) % alignof(std::max_align_t) ==
               0u);
    std::memset(p, static_cast<int>(bytes & 0xff), bytes);
    held.emplace_back(p, bytes);
  }
  for (auto& [p, bytes] : held) {
    auto* c = static_cast<unsigned char*>(p);
    BOOST_TEST((c[0] == (bytes & 0xff) && c[bytes - 1] == (bytes & 0xff)));
    pool_deallocate(p, bytes);
  }
}

BOOST_AUTO_TEST_CASE(threads_freeing_each_others_blocks_corrupt_nothing) {
  // Each thread makes blocks stamped with their own address and hands
  // them to a random thread's inbox; each frees what it finds there after
  // checking the stamp.
  constexpr int threads = 4;
  constexpr int rounds = 20000;
  std::mutex mtx;
  std::vector<std::vector<std::pair<void*, size_t>>> inbox(threads);
  std::vector<std::thread> ts;
  std::vector<int> bad(threads, 0);
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < rounds; ++i) {
        size_t bytes = 8 + rng() % 600;
        auto* p = static_cast<uintptr_t*>(pool_allocate(bytes));
        for (size_t w = 0; w < bytes / sizeof(uintptr_t); ++w)
          p[w] = reinterpret_cast<uintptr_t>(p) + w;
        std::vector<std::pair<void*, size_t>> mine;
        {
          std::lock_guard<std::mutex> guard{mtx};
          inbox[rng() % threads].emplace_back(p, bytes);
          mine.swap(inbox[static_cast<size_t>(t)]);
        }
        for (auto& [q, n] : mine) {
          auto* w = static_cast<uintptr_t*>(q);
          for (size_t k = 0; k < n / sizeof(uintptr_t); ++k)
            bad[static_cast<size_t>(t)] +=
              w[k] != reinterpret_cast<uintptr_t>(q) + k;
          pool_deallocate(q, n);
        }
      }
    });
  for (auto& th : ts)
    th.join();
  for (auto& box : inbox)
    for (auto& [q, n] : box)
      pool_deallocate(q, n);
  for (int t = 0; t < threads; ++t)
    BOOST_TEST(bad[static_cast<size_t>(t)] == 0);
}
