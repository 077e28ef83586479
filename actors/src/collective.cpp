#include "lumen/ml/collective.hpp"

#include <cstring>
#include <functional>

#include "groups.hpp"

namespace lumen::collective {

namespace {

using detail::member_of;
using detail::membership;
using detail::settled;
using detail::slot;

/// Dispatches on a dtype to `fn(T{})`.
template <class F>
void with_type(ml::dtype t, F&& fn) {
  switch (t) {
    case ml::dtype::float32:
      return fn(float{});
    case ml::dtype::float64:
      return fn(double{});
    case ml::dtype::int32:
      return fn(int32_t{});
    case ml::dtype::int64:
      return fn(int64_t{});
  }
}

std::string describe(const slot& s) {
  return std::to_string(s.numel) + " " + ml::to_string(s.type);
}

/// The slots disagree on dtype, length or op: who and how.
std::string check_same(const std::vector<slot>& slots, bool same_op) {
  for (size_t r = 1; r < slots.size(); ++r) {
    if (slots[r].what != slots[0].what)
      return "rank " + std::to_string(r) + " called " + slots[r].what +
             " while rank 0 called " + slots[0].what +
             "; every rank must call the same collective in the same order";
    if (slots[r].type != slots[0].type || slots[r].numel != slots[0].numel)
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
  auto world = static_cast<int>(slots.size());
  if (slots[0].has_root && (slots[0].root < 0 || slots[0].root >= world))
    return slots[0].what + " names rank " + std::to_string(slots[0].root) +
           ", which is out of range: the group has ranks 0 to " +
           std::to_string(world - 1);
  return {};
}

slot slot_of(const ml::tensor& t, std::string what) {
  slot s;
  s.type = t.type();
  s.numel = t.numel();
  s.shape = t.shape();
  s.what = std::move(what);
  return s;
}

/// A member's buffer, for the in-place collectives.
slot slot_of(char* data, ml::dtype type, size_t numel, std::string what) {
  slot s;
  s.data = data;
  s.type = type;
  s.numel = numel;
  s.shape = {static_cast<int64_t>(numel)};
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
void reduce_slice_into(const std::vector<slot>& all, size_t slice, size_t owner,
                       size_t numel, ml::dtype type, reduce_op op) {
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

const ml::tensor& tensor_in(const slot& s) {
  return *static_cast<const ml::tensor*>(s.in);
}

} // namespace

namespace {

/// Small buffers up to here go `direct`.
constexpr size_t direct_limit = 16 * 1024;

allreduce_algorithm choose(allreduce_algorithm a, size_t bytes) {
  if (a != allreduce_algorithm::automatic)
    return a;
  return bytes <= direct_limit ? allreduce_algorithm::direct
                               : allreduce_algorithm::slices;
}

/// Every rank reduces the whole buffer over all members' buffers, in rank
/// order (so all get the same numbers), into scratch memory; once everyone
/// has read, each writes its result over its own buffer.
void direct_allreduce(const membership& m, slot s, reduce_op op) {
  auto type = s.type;
  auto numel = s.numel;
  char* data = s.data;
  thread_local std::vector<char> scratch;
  auto reduce_all = [&](const std::vector<slot>& all) {
    auto bytes = numel * ml::size_of(type);
    scratch.assign(all[0].data, all[0].data + bytes);
    with_type(type, [&](auto t) {
      using T = decltype(t);
      auto acc = reinterpret_cast<T*>(scratch.data());
      for (size_t q = 1; q < all.size(); ++q)
        reduce_into(acc, elems<T>(all[q]), numel, op);
      finish(acc, numel, op, all.size());
    });
  };
  auto write_mine = [&](const std::vector<slot>&) {
    if (numel > 0)
      std::memcpy(data, scratch.data(), scratch.size());
  };
  m.group->run(
    m.rank, std::move(s),
    [](const std::vector<slot>& all) { return check_same(all, true); },
    {reduce_all, write_mine}, false);
}

void allreduce_in_place(const membership& m, char* data, ml::dtype type,
                        size_t numel, reduce_op op) {
  auto s = slot_of(data, type, numel, "allreduce");
  s.op = op;
  s.algorithm = choose(m.group->algorithm(), numel * ml::size_of(type));
  if (s.algorithm == allreduce_algorithm::direct)
    return direct_allreduce(m, std::move(s), op);
  auto rank = static_cast<size_t>(m.rank);
  auto world = static_cast<size_t>(m.group->world());
  // Each rank reduces its own slice over every member's buffer, into its
  // own buffer (nobody else reads that slice of it), then copies the
  // others' finished slices.
  auto reduce_mine = [&](const std::vector<slot>& all) {
    reduce_slice_into(all, rank, rank, numel, type, op);
  };
  auto gather_others = [&](const std::vector<slot>& all) {
    auto elem = ml::size_of(type);
    for (size_t q = 0; q < world; ++q) {
      auto c = chunk_of(numel, world, q);
      if (q != rank && c.size() > 0)
        std::memcpy(data + c.begin * elem, all[q].data + c.begin * elem,
                    c.size() * elem);
    }
  };
  m.group->run(
    m.rank, std::move(s),
    [](const std::vector<slot>& all) { return check_same(all, true); },
    {reduce_mine, gather_others});
}

void reduce_in_place(const membership& m, char* data, ml::dtype type,
                     size_t numel, int dst_rank, reduce_op op) {
  auto s = slot_of(data, type, numel, "reduce");
  s.op = op;
  s.has_root = true;
  s.root = dst_rank;
  auto rank = static_cast<size_t>(m.rank);
  // Rank r reduces slice r of every buffer into the destination's.
  auto reduce_mine = [&](const std::vector<slot>& all) {
    reduce_slice_into(all, rank, static_cast<size_t>(dst_rank), numel, type,
                      op);
  };
  m.group->run(
    m.rank, std::move(s),
    [](const std::vector<slot>& all) { return check_same(all, true); },
    {reduce_mine});
}

void broadcast_in_place(const membership& m, char* data, ml::dtype type,
                        size_t numel, int src_rank) {
  auto s = slot_of(data, type, numel, "broadcast");
  s.has_root = true;
  s.root = src_rank;
  auto copy = [&](const std::vector<slot>& all) {
    if (m.rank != src_rank && numel > 0)
      std::memcpy(data, all[static_cast<size_t>(src_rank)].data,
                  numel * ml::size_of(type));
  };
  m.group->run(
    m.rank, std::move(s),
    [](const std::vector<slot>& all) { return check_same(all, false); },
    {copy});
}

void allgather_with(const membership& m, std::vector<ml::tensor>& out,
                    const ml::tensor& in) {
  auto s = slot_of(in, "allgather");
  s.in = &in;
  auto gather = [&](const std::vector<slot>& all) {
    out.clear();
    for (auto& q : all)
      out.push_back(tensor_in(q).clone());
  };
  m.group->run(m.rank, std::move(s),
               [](const std::vector<slot>& all) {
                 // The same operation everywhere first: only then is
                 // every slot's input a tensor.
                 auto same = check_same(all, false);
                 if (!same.empty())
                   return same;
                 for (size_t r = 1; r < all.size(); ++r)
                   if (all[r].shape != all[0].shape)
                     return "rank " + std::to_string(r) + " passed a " +
                            tensor_in(all[r]).describe() + ", rank 0 a " +
                            tensor_in(all[0]).describe() +
                            "; allgather needs the same shape everywhere";
                 return std::string{};
               },
               {gather});
}

void reducescatter_with(const membership& m, ml::tensor& out,
                        const std::vector<ml::tensor>& in, reduce_op op) {
  auto world = static_cast<size_t>(m.group->world());
  auto rank = static_cast<size_t>(m.rank);
  slot s;
  s.what = "reducescatter";
  s.in = &in;
  s.numel = in.size();
  s.op = op;
  auto list = [](const slot& x) -> const std::vector<ml::tensor>& {
    return *static_cast<const std::vector<ml::tensor>*>(x.in);
  };
  auto mine = [&](const std::vector<slot>& all) {
    out = list(all[0])[rank].clone();
    with_type(out.type(), [&](auto t) {
      using T = decltype(t);
      for (size_t q = 1; q < world; ++q)
        reduce_into(out.data<T>(), list(all[q])[rank].data<T>(), out.numel(),
                    op);
      finish(out.data<T>(), out.numel(), op, world);
    });
  };
  auto check = [world, list](const std::vector<slot>& all) -> std::string {
    for (size_t q = 0; q < all.size(); ++q)
      if (all[q].what != "reducescatter" || all[q].numel != world)
        return "rank " + std::to_string(q) + " called " + all[q].what +
               " with " + std::to_string(all[q].numel) +
               " tensors; reducescatter takes one tensor per rank (" +
               std::to_string(world) + ") on every rank";
    for (size_t r = 0; r < world; ++r)
      for (size_t q = 1; q < all.size(); ++q) {
        auto& a = list(all[0])[r];
        auto& b = list(all[q])[r];
        if (a.type() != b.type() || a.shape() != b.shape())
          return "tensor " + std::to_string(r) + " of rank " +
                 std::to_string(q) + " is a " + b.describe() +
                 ", of rank 0 a " + a.describe() +
                 "; every rank must pass the same shapes";
      }
    for (size_t q = 1; q < all.size(); ++q)
      if (all[q].op != all[0].op)
        return "rank " + std::to_string(q) + " asked for " +
               to_string(all[q].op) + ", rank 0 for " + to_string(all[0].op);
    return {};
  };
  m.group->run(m.rank, std::move(s), check, {mine});
}

void barrier_with(const membership& m) {
  slot s;
  s.what = "barrier";
  m.group->run(
    m.rank, std::move(s),
    [](const std::vector<slot>& all) { return check_same(all, false); }, {});
}

/// Queues `op` on the member's lane; its ref is ready once `op` ran.
template <class Op>
ObjectRef<void> later(const std::string& group, Op op) {
  auto& m = member_of(group);
  if (!m.lane)
    m.lane = std::make_shared<detail::async_lane>();
  auto done = std::make_shared<promise<void>>();
  auto ref = done->ref();
  // Not the lane itself: a closure holding it could end it on its thread.
  membership who{m.group, m.rank, nullptr};
  m.lane->post([who, op, done]() mutable {
    try {
      op(who);
      done->set_value();
    } catch (...) {
      done->set_error(std::current_exception());
    }
  });
  return ref;
}

char* bytes_of(std::vector<float>& v) {
  return reinterpret_cast<char*>(v.data());
}

} // namespace

const char* to_string(allreduce_algorithm a) noexcept {
  switch (a) {
    case allreduce_algorithm::automatic:
      return "automatic";
    case allreduce_algorithm::slices:
      return "slices";
    case allreduce_algorithm::direct:
      return "direct";
  }
  return "unknown";
}

void set_algorithm(const std::string& group, allreduce_algorithm a) {
  member_of(group).group->set_algorithm(a);
}

allreduce_algorithm algorithm_for(const std::string& group, size_t bytes) {
  return choose(member_of(group).group->algorithm(), bytes);
}

void allreduce(ml::tensor& buf, const std::string& group, reduce_op op) {
  allreduce_in_place(settled(group), buf.raw(), buf.type(), buf.numel(), op);
}

void allreduce(std::vector<float>& buf, const std::string& group,
               reduce_op op) {
  allreduce_in_place(settled(group), bytes_of(buf), ml::dtype::float32,
                     buf.size(), op);
}

ObjectRef<void> allreduce_async(ml::tensor& buf, const std::string& group,
                                reduce_op op) {
  // A copy of the handle shares the storage, and keeps it alive.
  return later(group, [b = buf, op](const membership& m) mutable {
    allreduce_in_place(m, b.raw(), b.type(), b.numel(), op);
  });
}

ObjectRef<void> allreduce_async(std::vector<float>& buf,
                                const std::string& group, reduce_op op) {
  return later(group, [b = &buf, op](const membership& m) {
    allreduce_in_place(m, bytes_of(*b), ml::dtype::float32, b->size(), op);
  });
}

void reduce(ml::tensor& buf, int dst_rank, const std::string& group,
            reduce_op op) {
  reduce_in_place(settled(group), buf.raw(), buf.type(), buf.numel(), dst_rank,
                  op);
}

ObjectRef<void> reduce_async(ml::tensor& buf, int dst_rank,
                             const std::string& group, reduce_op op) {
  return later(group, [b = buf, dst_rank, op](const membership& m) mutable {
    reduce_in_place(m, b.raw(), b.type(), b.numel(), dst_rank, op);
  });
}

void broadcast(ml::tensor& buf, int src_rank, const std::string& group) {
  broadcast_in_place(settled(group), buf.raw(), buf.type(), buf.numel(),
                     src_rank);
}

void broadcast(std::vector<float>& buf, int src_rank,
               const std::string& group) {
  broadcast_in_place(settled(group), bytes_of(buf), ml::dtype::float32,
                     buf.size(), src_rank);
}

ObjectRef<void> broadcast_async(ml::tensor& buf, int src_rank,
                                const std::string& group) {
  return later(group, [b = buf, src_rank](const membership& m) mutable {
    broadcast_in_place(m, b.raw(), b.type(), b.numel(), src_rank);
  });
}

void allgather(std::vector<ml::tensor>& out, const ml::tensor& in,
               const std::string& group) {
  allgather_with(settled(group), out, in);
}

ObjectRef<void> allgather_async(std::vector<ml::tensor>& out, ml::tensor in,
                                const std::string& group) {
  return later(
    group, [o = &out, in](const membership& m) { allgather_with(m, *o, in); });
}

void reducescatter(ml::tensor& out, const std::vector<ml::tensor>& in,
                   const std::string& group, reduce_op op) {
  reducescatter_with(settled(group), out, in, op);
}

ObjectRef<void> reducescatter_async(ml::tensor& out, std::vector<ml::tensor> in,
                                    const std::string& group, reduce_op op) {
  return later(group, [o = &out, in, op](const membership& m) {
    reducescatter_with(m, *o, in, op);
  });
}

void barrier(const std::string& group) {
  barrier_with(settled(group));
}

ObjectRef<void> barrier_async(const std::string& group) {
  return later(group, [](const membership& m) { barrier_with(m); });
}

} // namespace lumen::collective
