#include <cstring>

#include "collective/algorithms/algorithms.hpp"

// Which all-reduce runs, and the reduce, which is an all-reduce whose
// result only its destination keeps.

namespace lumen::collective::detail {

namespace {

/// Up to here an all-reduce goes `direct` (by
/// `recursive_doubling` in a power-of-two group of more than two): one
/// exchange, or log2 N, beat the ring's 2(N-1) steps for small buffers.
constexpr size_t direct_limit = 64 * 1024;

/// In a power-of-two group of more than two, `halving_doubling` up to
/// here (above direct_limit, where `recursive_doubling` takes the
/// small ones; measured on loopback with four members, allreduce_bench),
/// `ring` above.
constexpr size_t halving_limit = 1024 * 1024;

} // namespace

op_descriptor describe(operation_kind what, ml::dtype type, size_t numel) {
  op_descriptor d;
  d.what = static_cast<uint32_t>(what);
  d.type = static_cast<uint8_t>(type);
  d.numel = numel;
  return d;
}

/// What is wrong with `root` for the group, or empty.
std::string root_problem(const transport& t, int root, const char* what) {
  if (root >= 0 && root < t.world())
    return {};
  return std::string{what} + " names rank " + std::to_string(root) +
         ", which is out of range: the group has ranks 0 to " +
         std::to_string(t.world() - 1);
}

allreduce_algorithm choose_algorithm(allreduce_algorithm a, size_t bytes,
                                     int world) {
  if (a != allreduce_algorithm::automatic)
    return a;
  // At N = 2 halving-doubling is the ring; above, fewer steps win where
  // the ring's would be short.
  bool halving = world > 2 && (world & (world - 1)) == 0;
  if (halving)
    return bytes <= direct_limit    ? allreduce_algorithm::recursive_doubling
           : bytes <= halving_limit ? allreduce_algorithm::halving_doubling
                                    : allreduce_algorithm::ring;
  return bytes <= direct_limit ? allreduce_algorithm::direct
                               : allreduce_algorithm::ring;
}

void run_allreduce(transport& t, allreduce_algorithm algorithm, char* data,
                   ml::dtype type, size_t numel, reduce_op op) {
  auto d = describe(operation_kind::allreduce, type, numel);
  d.op = static_cast<uint8_t>(op);
  algorithm = choose_algorithm(algorithm, numel * ml::size_of(type), t.world());
  std::string problem;
  bool pairwise = algorithm == allreduce_algorithm::halving_doubling ||
                  algorithm == allreduce_algorithm::recursive_doubling;
  if (pairwise && (t.world() & (t.world() - 1)) != 0)
    problem = std::string{to_string(algorithm)} +
              " needs a power-of-two world size and the group has " +
              std::to_string(t.world()) + " members; use ring or direct";
  d.algorithm = static_cast<uint8_t>(algorithm);
  if (algorithm == allreduce_algorithm::recursive_doubling && problem.empty()) {
    if (t.agrees_by_doubling())
      return doubling_allreduce(t, d, data, type, numel, op);
    // One or two members: a swap, as direct does it.
    return direct_allreduce(t, d, data, type, numel, op);
  }
  if (algorithm == allreduce_algorithm::direct)
    return direct_allreduce(t, d, data, type, numel, op);
  t.start(d, true, problem);
  if (algorithm == allreduce_algorithm::naive)
    naive_allreduce(t, data, type, numel, op);
  else if (algorithm == allreduce_algorithm::halving_doubling)
    halving_doubling_allreduce(t, data, type, numel, op);
  else
    ring_allreduce(t, data, type, numel, op);
}

void run_reduce(transport& t, allreduce_algorithm algorithm, char* data,
                ml::dtype type, size_t numel, int dst, reduce_op op) {
  if (auto problem = root_problem(t, dst, "reduce"); !problem.empty())
    throw collective_error("group '" + t.name() + "': " + problem, errc::usage);
  if (t.rank() == dst)
    return run_allreduce(t, algorithm, data, type, numel, op);
  // The others reduce a copy: their buffers stay as they were.
  auto& copy = t.scratch(2, numel * ml::size_of(type));
  if (numel > 0)
    std::memcpy(copy.data(), data, numel * ml::size_of(type));
  run_allreduce(t, algorithm, copy.data(), type, numel, op);
}

} // namespace lumen::collective::detail
