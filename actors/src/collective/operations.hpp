#pragma once

// What the collectives' operations share: a member's slot for a round,
// the checks that the slots agree, the slice reduction, and how an _async
// form queues an operation on the member's lane.

#include <cstring>
#include <string>
#include <vector>

#include "lumen/collective/collective.hpp"

#include "collective/algorithms/algorithms.hpp"
#include "collective/groups.hpp"
#include "collective/reduce.hpp"

namespace lumen::collective::detail {

inline std::string describe(const slot& s) {
  return (s.count > 0 ? std::to_string(s.count) + " tensors of " : "") +
         std::to_string(s.numel) + " " + ml::to_string(s.type);
}

/// The slots disagree on dtype, length or op: who and how.
inline std::string check_same(const std::vector<slot>& slots, bool same_op) {
  for (size_t r = 1; r < slots.size(); ++r) {
    if (slots[r].what != slots[0].what)
      return "rank " + std::to_string(r) + " called " + slots[r].what +
             " while rank 0 called " + slots[0].what +
             "; every rank must call the same collective in the same order";
    if (slots[r].type != slots[0].type || slots[r].numel != slots[0].numel ||
        slots[r].count != slots[0].count)
      return "rank " + std::to_string(r) + " passed " + describe(slots[r]) +
             " elements, rank 0 passed " + describe(slots[0]) +
             "; every rank must pass the same dtype and length";
    if (slots[r].algorithm != slots[0].algorithm)
      return "rank " + std::to_string(r) + " all-reduces " +
             to_string(slots[r].algorithm) + ", rank 0 " +
             to_string(slots[0].algorithm) +
             "; every member must use the same algorithm";
    if (same_op && slots[r].op != slots[0].op)
      return "rank " + std::to_string(r) + " asked for " +
             to_string(slots[r].op) + ", rank 0 for " + to_string(slots[0].op);
    if (slots[r].root != slots[0].root)
      return "rank " + std::to_string(r) + " named rank " +
             std::to_string(slots[r].root) + " as the root, rank 0 named " +
             std::to_string(slots[0].root);
  }
  return {};
}

/// A member's buffer, for the in-place collectives.
inline slot slot_of(char* data, ml::dtype type, size_t numel,
                    std::string what) {
  slot s;
  s.data = data;
  s.type = type;
  s.numel = numel;
  s.what = std::move(what);
  return s;
}

template <class T>
T* elems(const slot& s) {
  return reinterpret_cast<T*>(s.data);
}

/// Reduces slice `slice` of every member's buffer with `op` into that slice
/// of member `owner`'s buffer, which holds the owner's own values to start
/// with. Only the member whose slice it is touches it, in any buffer.
inline void reduce_slice_into(const std::vector<slot>& all, size_t slice,
                              size_t owner, size_t numel, ml::dtype type,
                              reduce_op op) {
  with_type(type, [&](auto t) {
    using T = decltype(t);
    auto c = chunk_of(numel, all.size(), slice);
    T* acc = elems<T>(all[owner]) + c.begin;
    for (size_t q = 0; q < all.size(); ++q)
      if (q != owner)
        reduce_into(acc, elems<T>(all[q]) + c.begin, c.size(), op);
    finish(acc, c.size(), op, all.size());
  });
}

/// Queues `op` on the member's lane; its ref is ready once `op` ran.
template <class Op>
ObjectRef<void> later(const std::string& group, Op op) {
  auto& m = caught_up(group);
  auto done = std::make_shared<promise<void>>();
  auto ref = done->ref();
  // Not the lane itself: a closure holding it could end it on its thread.
  membership who{m.group, m.rank, nullptr, m.net, m.over};
  auto run = [who, op, done]() mutable {
    try {
      op(who);
      done->set_value();
    } catch (...) {
      done->set_error(std::current_exception());
    }
  };
  // In a simulated run the lane runs it beside the caller, in virtual time.
  if (!m.lane)
    m.lane = std::make_shared<util::work_queue>();
  m.lane->post(std::move(run));
  return ref;
}

inline char* bytes_of(std::vector<float>& v) {
  return reinterpret_cast<char*>(v.data());
}

} // namespace lumen::collective::detail
