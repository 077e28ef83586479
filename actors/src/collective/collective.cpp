#include "lumen/collective/collective.hpp"

#include "collective/operations.hpp"

namespace lumen::collective {

using namespace detail;

namespace {

/// The all-reduce a reduce runs: in one process, `direct` if the group
/// asks for it, else as across processes (`slices` reads the members'
/// buffers, which only the all-reduce's rounds do).
allreduce_algorithm reduce_algorithm(const membership& m) {
  if (!m.group)
    return m.over->algorithm();
  return m.group->algorithm() == allreduce_algorithm::direct
           ? allreduce_algorithm::direct
           : allreduce_algorithm::automatic;
}

void reduce_in_place(const membership& m, char* data, ml::dtype type,
                     size_t numel, int dst_rank, reduce_op op) {
  op_span span{"reduce", m, numel * ml::size_of(type)};
  run_reduce(*m.over, reduce_algorithm(m), data, type, numel, dst_rank, op);
}

void broadcast_in_place(const membership& m, char* data, ml::dtype type,
                        size_t numel, int src_rank) {
  op_span span{"broadcast", m, numel * ml::size_of(type)};
  run_broadcast(*m.over, data, type, numel, src_rank);
}

void allgather_with(const membership& m, std::vector<ml::tensor>& out,
                    const ml::tensor& in) {
  op_span span{"allgather", m, in.nbytes()};
  run_allgather(*m.over, out, in);
}

void reducescatter_with(const membership& m, ml::tensor& out,
                        const std::vector<ml::tensor>& in, reduce_op op) {
  op_span span{"reducescatter", m, out.nbytes()};
  run_reducescatter(*m.over, out, in, op);
}

void barrier_with(const membership& m) {
  op_span span{"barrier", m, 0};
  run_barrier(*m.over);
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
