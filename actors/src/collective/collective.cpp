#include "lumen/collective/collective.hpp"

#include <cstring>

#include "collective/operations.hpp"

namespace lumen::collective {

using namespace detail;

namespace {

void reduce_in_place(const membership& m, char* data, ml::dtype type,
                     size_t numel, int dst_rank, reduce_op op) {
  op_span span{"reduce", m, numel * ml::size_of(type)};
  if (m.net)
    return net_reduce(*m.net, data, type, numel, dst_rank, op);
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
  op_span span{"broadcast", m, numel * ml::size_of(type)};
  if (m.net)
    return net_broadcast(*m.net, data, type, numel, src_rank);
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
  op_span span{"allgather", m, in.nbytes()};
  if (m.net)
    return net_allgather(*m.net, out, in);
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
  op_span span{"reducescatter", m, out.nbytes()};
  if (m.net)
    return net_reducescatter(*m.net, out, in, op);
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
  op_span span{"barrier", m, 0};
  if (m.net)
    return net_barrier(*m.net);
  slot s;
  s.what = "barrier";
  m.group->run(
    m.rank, std::move(s),
    [](const std::vector<slot>& all) { return check_same(all, false); }, {});
}

} // namespace

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
