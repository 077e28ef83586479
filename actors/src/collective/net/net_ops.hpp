#pragma once

// The collectives of a group spanning processes (net_group.hpp); each
// throws `collective_error` on every member when one fails.

#include <vector>

#include "lumen/collective/collective.hpp"

#include "collective/net/net_group.hpp"

namespace lumen::collective::detail {

/// The algorithm an all-reduce of `bytes` bytes takes when `a` is asked
/// for across processes.
allreduce_algorithm net_choose(allreduce_algorithm a, size_t bytes, int world);

void net_allreduce(net_group& g, char* data, ml::dtype type, size_t numel,
                   reduce_op op);
void net_reduce(net_group& g, char* data, ml::dtype type, size_t numel, int dst,
                reduce_op op);
void net_broadcast(net_group& g, char* data, ml::dtype type, size_t numel,
                   int src);
void net_allgather(net_group& g, std::vector<ml::tensor>& out,
                   const ml::tensor& in);
void net_reducescatter(net_group& g, ml::tensor& out,
                       const std::vector<ml::tensor>& in, reduce_op op);
void net_barrier(net_group& g);

/// Reduces the `n` buffers at `bufs` (rank order) into `out`, so that every
/// member that reduces them gets the same bits.
void reduce_in_rank_order(const std::vector<const char*>& bufs, char* out,
                          ml::dtype type, size_t numel, reduce_op op);
void net_send(net_group& g, const char* data, ml::dtype type, size_t numel,
              int dst);
void net_recv(net_group& g, char* data, ml::dtype type, size_t numel, int src);

} // namespace lumen::collective::detail
