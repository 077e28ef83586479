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
                     size_t numel, int dst_rank, reduce_op op,
                     const call_site& site) {
  op_span span{"reduce", m, numel * ml::size_of(type), site};
  run_reduce(*m.over, reduce_algorithm(m), data, type, numel, dst_rank, op);
}

void broadcast_in_place(const membership& m, char* data, ml::dtype type,
                        size_t numel, int src_rank, const call_site& site) {
  op_span span{"broadcast", m, numel * ml::size_of(type), site};
  run_broadcast(*m.over, data, type, numel, src_rank);
}

void allgather_with(const membership& m, std::vector<ml::tensor>& out,
                    const ml::tensor& in, const call_site& site) {
  op_span span{"allgather", m, in.nbytes(), site};
  run_allgather(*m.over, out, in);
}

void reducescatter_with(const membership& m, ml::tensor& out,
                        const std::vector<ml::tensor>& in, reduce_op op,
                        const call_site& site) {
  op_span span{"reducescatter", m, out.nbytes(), site};
  run_reducescatter(*m.over, out, in, op);
}

void barrier_with(const membership& m, const call_site& site) {
  op_span span{"barrier", m, 0, site};
  run_barrier(*m.over);
}

} // namespace

void reduce(ml::tensor& buf, int dst_rank, const std::string& group,
            reduce_op op, call_site site) {
  reduce_in_place(settled(group), buf.raw(), buf.type(), buf.numel(), dst_rank,
                  op, site);
}

ObjectRef<void> reduce_async(ml::tensor& buf, int dst_rank,
                             const std::string& group, reduce_op op,
                             call_site site) {
  return later(
    group, [site, b = buf, dst_rank, op](const membership& m) mutable {
      reduce_in_place(m, b.raw(), b.type(), b.numel(), dst_rank, op, site);
    });
}

void broadcast(ml::tensor& buf, int src_rank, const std::string& group,
               call_site site) {
  broadcast_in_place(settled(group), buf.raw(), buf.type(), buf.numel(),
                     src_rank, site);
}

void broadcast(std::vector<float>& buf, int src_rank, const std::string& group,
               call_site site) {
  broadcast_in_place(settled(group), bytes_of(buf), ml::dtype::float32,
                     buf.size(), src_rank, site);
}

ObjectRef<void> broadcast_async(ml::tensor& buf, int src_rank,
                                const std::string& group, call_site site) {
  return later(group, [site, b = buf, src_rank](const membership& m) mutable {
    broadcast_in_place(m, b.raw(), b.type(), b.numel(), src_rank, site);
  });
}

void allgather(std::vector<ml::tensor>& out, const ml::tensor& in,
               const std::string& group, call_site site) {
  allgather_with(settled(group), out, in, site);
}

ObjectRef<void> allgather_async(std::vector<ml::tensor>& out, ml::tensor in,
                                const std::string& group, call_site site) {
  return later(group, [site, o = &out, in](const membership& m) {
    allgather_with(m, *o, in, site);
  });
}

void reducescatter(ml::tensor& out, const std::vector<ml::tensor>& in,
                   const std::string& group, reduce_op op, call_site site) {
  reducescatter_with(settled(group), out, in, op, site);
}

ObjectRef<void> reducescatter_async(ml::tensor& out, std::vector<ml::tensor> in,
                                    const std::string& group, reduce_op op,
                                    call_site site) {
  return later(group, [site, o = &out, in, op](const membership& m) {
    reducescatter_with(m, *o, in, op, site);
  });
}

void barrier(const std::string& group, call_site site) {
  barrier_with(settled(group), site);
}

ObjectRef<void> barrier_async(const std::string& group, call_site site) {
  return later(group, [site](const membership& m) { barrier_with(m, site); });
}

} // namespace lumen::collective
