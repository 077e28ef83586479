#pragma once

// Each collective, written once over a transport (transport.hpp): members
// in processes run them over their channels, members in one process over
// mailboxes in memory. Each throws `collective_error` on every member when
// one fails. Their steps and bytes are in actors/doc/collectives.md.

#include <vector>

#include "lumen/collective/collective.hpp"

#include "collective/transport.hpp"

namespace lumen::collective::detail {

/// The algorithm an all-reduce of `bytes` bytes over `world` members takes
/// when `a` is asked for (`automatic`: by size and world).
allreduce_algorithm choose_algorithm(allreduce_algorithm a, size_t bytes,
                                     int world);

/// All-reduces in place by `algorithm` (as `choose_algorithm` picks it).
void run_allreduce(transport& t, allreduce_algorithm algorithm, char* data,
                   ml::dtype type, size_t numel, reduce_op op);
void run_reduce(transport& t, allreduce_algorithm algorithm, char* data,
                ml::dtype type, size_t numel, int dst, reduce_op op);
void run_broadcast(transport& t, char* data, ml::dtype type, size_t numel,
                   int src);
void run_allgather(transport& t, std::vector<ml::tensor>& out,
                   const ml::tensor& in);
void run_reducescatter(transport& t, ml::tensor& out,
                       const std::vector<ml::tensor>& in, reduce_op op);
void run_barrier(transport& t);
void run_send(transport& t, const char* data, ml::dtype type, size_t numel,
              int dst);
void run_recv(transport& t, char* data, ml::dtype type, size_t numel, int src);

// The all-reduces, each in its own file; `d` is the operation's
// descriptor where the algorithm starts the operation itself.
void ring_allreduce(transport& t, char* data, ml::dtype type, size_t numel,
                    reduce_op op);
void halving_doubling_allreduce(transport& t, char* data, ml::dtype type,
                                size_t numel, reduce_op op);
void direct_allreduce(transport& t, const op_descriptor& d, char* data,
                      ml::dtype type, size_t numel, reduce_op op);
void doubling_allreduce(transport& t, const op_descriptor& d, char* data,
                        ml::dtype type, size_t numel, reduce_op op);
void naive_allreduce(transport& t, char* data, ml::dtype type, size_t numel,
                     reduce_op op);

/// What is wrong with `root` for the group, or empty.
std::string root_problem(const transport& t, int root, const char* what);

/// An operation's descriptor, as `start` compares it.
op_descriptor describe(operation_kind what, ml::dtype type, size_t numel);

} // namespace lumen::collective::detail
