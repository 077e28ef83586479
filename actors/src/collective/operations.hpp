#pragma once

// What the collectives' operations share: a member's slot for a round,
// the checks that the slots agree, the slice reduction, and how an _async
// form queues an operation on the member's lane.

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "lumen/collective/collective.hpp"

#include "collective/algorithms/algorithms.hpp"
#include "collective/groups.hpp"
#include "collective/reduce.hpp"

namespace lumen::collective::detail {

/// What slot `s` would say on a wire (its site's text only `with_site`):
/// the checks of the members of one process and of members apart are one
/// (`disagreement`).
inline op_descriptor descriptor_of(const slot& s, bool with_site) {
  op_descriptor d;
  d.seq = s.seq;
  d.what = static_cast<uint32_t>(s.kind);
  d.type = static_cast<uint8_t>(s.type);
  d.op = static_cast<uint8_t>(s.op);
  d.algorithm = static_cast<uint8_t>(s.algorithm);
  d.root = s.root;
  d.numel = s.numel;
  d.count = s.count;
  if (with_site)
    call_site_text(s.site, d.site);
  return d;
}

/// The slots disagree on the operation, dtype, length, op or root: who,
/// how, and where each of the two called it (the sites put into words
/// only then: the check runs on every operation).
inline std::string check_same(const std::vector<slot>& slots, bool same_op) {
  auto first = descriptor_of(slots[0], false);
  for (size_t r = 1; r < slots.size(); ++r) {
    auto rank = static_cast<int>(r);
    if (!disagreement(descriptor_of(slots[r], false), rank, first, 0, same_op)
           .empty())
      return disagreement(descriptor_of(slots[r], true), rank,
                          descriptor_of(slots[0], true), 0, same_op);
  }
  return {};
}

/// A member's buffer, for the in-place collectives, in the operation its
/// transport `t` counts.
inline slot slot_of(const transport& t, char* data, ml::dtype type,
                    size_t numel, operation_kind kind) {
  slot s;
  s.data = data;
  s.type = type;
  s.numel = numel;
  s.kind = kind;
  s.seq = t.calls();
  s.site = t.site();
  return s;
}

template <class T>
T* elems(const slot& s) {
  return reinterpret_cast<T*>(s.data);
}

/// Reduces member `rank`'s slice of every member's buffer with `op` and
/// writes the result over that slice of every buffer, a block at a time
/// while the block is in this core's cache: one pass over the slice where a
/// reduction into the own buffer and a copy by each other member took two.
/// Only the member whose slice it is touches it, in any buffer.
inline void reduce_slice_everywhere(const std::vector<slot>& all, size_t rank,
                                    size_t numel, ml::dtype type,
                                    reduce_op op) {
  with_type(type, [&](auto t) {
    using T = decltype(t);
    constexpr size_t block = 16 * 1024 / sizeof(T);
    auto c = chunk_of(numel, all.size(), rank);
    for (size_t at = c.begin; at < c.end; at += block) {
      auto n = std::min(block, c.end - at);
      T* acc = elems<T>(all[rank]) + at;
      for (size_t q = 0; q < all.size(); ++q)
        if (q != rank)
          reduce_into(acc, elems<T>(all[q]) + at, n, op);
      finish(acc, n, op, all.size());
      for (size_t q = 0; q < all.size(); ++q)
        if (q != rank)
          std::memcpy(elems<T>(all[q]) + at, acc, n * sizeof(T));
    }
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
