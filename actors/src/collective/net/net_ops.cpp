#include "collective/net/net_ops.hpp"

#include <algorithm>
#include <cstring>

#include "collective/net/net_ring.hpp"
#include "collective/operations.hpp"

// The collectives of a group that spans processes, over the members'
// channels (net_link.hpp).

namespace lumen::collective::detail {

namespace {

/// Up to here an all-reduce goes `direct` across processes (by
/// `recursive_doubling` in a power-of-two group of more than two): one
/// exchange, or log2 N, beat the ring's 2(N-1) steps for small buffers.
constexpr size_t net_direct_limit = 64 * 1024;

/// In a power-of-two group of more than two, `halving_doubling` up to
/// here (above net_direct_limit, where `recursive_doubling` takes the
/// small ones; measured on loopback with four members, allreduce_bench),
/// `ring` above.
constexpr size_t halving_limit = 1024 * 1024;

/// Up to here a direct all-reduce's data leaves with its descriptor.
constexpr size_t direct_inline = 64 * 1024;

op_descriptor describe(operation_kind what, ml::dtype type, size_t numel) {
  op_descriptor d;
  d.what = static_cast<uint32_t>(what);
  d.type = static_cast<uint8_t>(type);
  d.numel = numel;
  return d;
}

/// What is wrong with `root` for the group, or empty.
std::string root_problem(net_group& g, int root, const char* what) {
  if (root >= 0 && root < g.world())
    return {};
  return std::string{what} + " names rank " + std::to_string(root) +
         ", which is out of range: the group has ranks 0 to " +
         std::to_string(g.world() - 1);
}

void ring_allreduce(net_group& g, char* data, ml::dtype type, size_t numel,
                    reduce_op op) {
  ring_run ring{g, data, type, numel, "allreduce"};
  // Reduce-scatter: send chunk r, then reduce what comes and pass it on;
  // its last chunk (complete) is the all-gather's first send.
  ring.send_chunk(static_cast<size_t>(g.rank()));
  ring.pass(1, true, op, true);
  // All-gather: copy the complete chunks in as they come round.
  ring.pass(0, false, op, false);
  ring.run();
}

} // namespace

void reduce_in_rank_order(const std::vector<const char*>& bufs, char* out,
                          ml::dtype type, size_t numel, reduce_op op) {
  with_type(type, [&](auto t) {
    using T = decltype(t);
    // Block by block, so that a block's partial result stays in the
    // cache while every buffer is added to it: one pass over memory.
    constexpr size_t block = 4096;
    auto acc = reinterpret_cast<T*>(out);
    for (size_t at = 0; at < numel; at += block) {
      auto n = std::min(block, numel - at);
      auto first = reinterpret_cast<const T*>(bufs[0]) + at;
      if (first != acc + at)
        std::memmove(acc + at, first, n * sizeof(T));
      for (size_t q = 1; q < bufs.size(); ++q)
        reduce_into(acc + at, reinterpret_cast<const T*>(bufs[q]) + at, n, op);
      finish(acc + at, n, op, bufs.size());
    }
  });
}

namespace {

/// Every member sends its whole buffer to every other and reduces all N
/// in rank order: one step, N-1 times the bytes of the ring per rank.
void direct_allreduce(net_group& g, op_descriptor d, char* data, ml::dtype type,
                      size_t numel, reduce_op op) {
  auto& l = g.links();
  int n = g.world(), r = g.rank();
  auto bytes = numel * ml::size_of(type);
  if (bytes <= direct_inline && !g.agrees_by_doubling()) {
    g.start(d, true, {}, data, bytes); // the data leaves with the start
  } else {
    g.start(d, true);
    // Rank r writes to r+1, r+2, ... and reads from r-1, r-2, ...: the
    // k-th write of each rank meets the k-th read of its peer, so a buffer
    // too large for the sockets cannot leave two members waiting on each
    // other.
    for (int k = 1; k < n; ++k)
      l.post((r + k) % n, frame_kind::data, data, bytes);
  }
  auto& all = g.scratch(0, bytes * static_cast<size_t>(n));
  std::vector<const char*> bufs(static_cast<size_t>(n));
  for (int k = 1; k < n; ++k) {
    int p = (r - k + n) % n;
    char* into = all.data() + static_cast<size_t>(p) * bytes;
    l.read_data(p, into, bytes, "allreduce");
    bufs[static_cast<size_t>(p)] = into;
  }
  l.flush(); // our buffer is out: it may change now
  auto& mine = g.scratch(1, bytes);
  if (bytes > 0)
    std::memcpy(mine.data(), data, bytes);
  bufs[static_cast<size_t>(r)] = mine.data();
  reduce_in_rank_order(bufs, data, type, numel, op);
}

/// Recursive doubling: log2 N rounds, rank r and rank r XOR 2^k swap
/// their partial results in round k and both reduce them, the lower
/// rank's first, so that both get the same bits; the rounds carry the
/// start's agreement too, so a small all-reduce costs log2 N latencies
/// and sends S·log2 N bytes per rank. The buffer changes only once all
/// agreed.
void doubling_allreduce(net_group& g, const op_descriptor& d, char* data,
                        ml::dtype type, size_t numel, reduce_op op) {
  auto& l = g.links();
  auto bytes = numel * ml::size_of(type);
  auto& acc = g.scratch(1, bytes);
  if (bytes > 0)
    std::memcpy(acc.data(), data, bytes);
  net_group::doubling_data rounds;
  rounds.send = [&] { return std::make_pair(acc.data(), bytes); };
  rounds.take = [&](int partner, uint64_t n, bool agreed) {
    auto& in = g.scratch(0, n);
    l.read_data(partner, in.data(), n, "allreduce");
    if (!agreed || n != bytes || bytes == 0)
      return;
    with_type(type, [&](auto t) {
      using T = decltype(t);
      auto mine = reinterpret_cast<T*>(acc.data());
      auto theirs = reinterpret_cast<T*>(in.data());
      if (g.rank() < partner) {
        reduce_into(mine, theirs, numel, op);
      } else {
        reduce_into(theirs, mine, numel, op);
        std::memcpy(mine, theirs, bytes);
      }
    });
  };
  g.agree_by_doubling(d, true, {}, &rounds);
  if (bytes > 0)
    std::memcpy(data, acc.data(), bytes);
  with_type(type, [&](auto t) {
    using T = decltype(t);
    finish(reinterpret_cast<T*>(data), numel, op,
           static_cast<size_t>(g.world()));
  });
}

/// Gather to rank 0, reduce there, broadcast back: the baseline the ring
/// is measured against (rank 0 receives and sends N-1 whole buffers).
void naive_allreduce(net_group& g, char* data, ml::dtype type, size_t numel,
                     reduce_op op) {
  auto& l = g.links();
  int n = g.world(), r = g.rank();
  auto bytes = numel * ml::size_of(type);
  if (r != 0) {
    l.post(0, frame_kind::data, data, bytes);
    l.flush();
    l.read_data(0, data, bytes, "allreduce");
    return;
  }
  auto& all = g.scratch(0, bytes * static_cast<size_t>(n));
  std::vector<const char*> bufs(static_cast<size_t>(n), data);
  for (int p = 1; p < n; ++p) {
    char* into = all.data() + static_cast<size_t>(p) * bytes;
    l.read_data(p, into, bytes, "allreduce");
    bufs[static_cast<size_t>(p)] = into;
  }
  reduce_in_rank_order(bufs, data, type, numel, op);
  for (int p = 1; p < n; ++p)
    l.post(p, frame_kind::data, data, bytes);
  l.flush();
}

} // namespace

allreduce_algorithm net_choose(allreduce_algorithm a, size_t bytes, int world) {
  if (a != allreduce_algorithm::automatic)
    return a;
  // At N = 2 halving-doubling is the ring; above, fewer steps win where
  // the ring's would be short.
  bool halving = world > 2 && (world & (world - 1)) == 0;
  if (halving)
    return bytes <= net_direct_limit ? allreduce_algorithm::recursive_doubling
           : bytes <= halving_limit  ? allreduce_algorithm::halving_doubling
                                     : allreduce_algorithm::ring;
  return bytes <= net_direct_limit ? allreduce_algorithm::direct
                                   : allreduce_algorithm::ring;
}

void net_allreduce(net_group& g, char* data, ml::dtype type, size_t numel,
                   reduce_op op) {
  auto d = describe(operation_kind::allreduce, type, numel);
  d.op = static_cast<uint8_t>(op);
  auto algorithm =
    net_choose(g.algorithm(), numel * ml::size_of(type), g.world());
  std::string problem;
  bool pairwise = algorithm == allreduce_algorithm::halving_doubling ||
                  algorithm == allreduce_algorithm::recursive_doubling;
  if (pairwise && (g.world() & (g.world() - 1)) != 0)
    problem = std::string{to_string(algorithm)} +
              " needs a power-of-two world size and the group has " +
              std::to_string(g.world()) + " members; use ring or direct";
  d.algorithm = static_cast<uint8_t>(algorithm);
  if (algorithm == allreduce_algorithm::recursive_doubling && problem.empty()) {
    if (g.agrees_by_doubling())
      return doubling_allreduce(g, d, data, type, numel, op);
    // One or two members: a swap, as direct does it.
    return direct_allreduce(g, d, data, type, numel, op);
  }
  if (algorithm == allreduce_algorithm::direct)
    return direct_allreduce(g, d, data, type, numel, op);
  g.start(d, true, problem);
  if (algorithm == allreduce_algorithm::naive)
    naive_allreduce(g, data, type, numel, op);
  else if (algorithm == allreduce_algorithm::halving_doubling)
    halving_doubling_allreduce(g, data, type, numel, op);
  else
    ring_allreduce(g, data, type, numel, op);
}

void net_reduce(net_group& g, char* data, ml::dtype type, size_t numel, int dst,
                reduce_op op) {
  if (auto problem = root_problem(g, dst, "reduce"); !problem.empty())
    throw collective_error("group '" + g.name() + "': " + problem, errc::usage);
  if (g.rank() == dst)
    return net_allreduce(g, data, type, numel, op);
  // The others reduce a copy: their buffers stay as they were.
  auto& copy = g.scratch(2, numel * ml::size_of(type));
  if (numel > 0)
    std::memcpy(copy.data(), data, numel * ml::size_of(type));
  net_allreduce(g, copy.data(), type, numel, op);
}

void net_broadcast(net_group& g, char* data, ml::dtype type, size_t numel,
                   int src) {
  auto d = describe(operation_kind::broadcast, type, numel);
  d.root = src;
  g.start(d, false, root_problem(g, src, "broadcast"));
  // A chain from the source round the ring, in segments, each rank
  // passing a segment on as soon as it has it.
  auto& l = g.links();
  int n = g.world(), r = g.rank();
  int right = (r + 1) % n, left = (r + n - 1) % n;
  auto elem = ml::size_of(type);
  auto seg = std::max<size_t>(1, segment_bytes / elem);
  for (size_t b = 0; b < numel; b += seg) {
    auto e = std::min(numel, b + seg);
    if (r != src)
      l.read_data(left, data + b * elem, (e - b) * elem, "broadcast");
    if (right != src)
      l.post(right, frame_kind::data, data + b * elem, (e - b) * elem);
  }
  l.flush();
}

void net_allgather(net_group& g, std::vector<ml::tensor>& out,
                   const ml::tensor& in) {
  auto d = describe(operation_kind::allgather, in.type(), in.numel());
  g.start(d, false);
  auto n = static_cast<size_t>(g.world());
  auto bytes = in.numel() * ml::size_of(in.type());
  // Rank q's tensor is chunk q of one buffer; the all-gather moves chunks
  // as the reduce-scatter does, copying instead of reducing.
  auto& all = g.scratch(3, bytes * n);
  if (bytes > 0)
    std::memcpy(all.data() + static_cast<size_t>(g.rank()) * bytes, in.raw(),
                bytes);
  ring_run ring{g, all.data(), in.type(), in.numel() * n, "allgather"};
  ring.send_chunk(static_cast<size_t>(g.rank()));
  ring.pass(1, false, reduce_op::sum, false);
  ring.run();
  out.clear();
  for (size_t q = 0; q < n; ++q) {
    ml::tensor t{in.shape(), in.type()};
    if (bytes > 0)
      std::memcpy(t.raw(), all.data() + q * bytes, bytes);
    out.push_back(std::move(t));
  }
}

void net_reducescatter(net_group& g, ml::tensor& out,
                       const std::vector<ml::tensor>& in, reduce_op op) {
  auto n = static_cast<size_t>(g.world());
  std::string problem;
  if (in.size() != n)
    problem = "rank " + std::to_string(g.rank()) + " passed " +
              std::to_string(in.size()) +
              " tensors; reducescatter takes one tensor per rank (" +
              std::to_string(n) + ") on every rank";
  for (size_t q = 1; q < in.size() && problem.empty(); ++q)
    if (in[q].type() != in[0].type() || in[q].shape() != in[0].shape())
      problem = "tensor " + std::to_string(q) + " of rank " +
                std::to_string(g.rank()) + " is a " + in[q].describe() +
                ", tensor 0 a " + in[0].describe() +
                "; every rank must pass the same shapes";
  auto d =
    in.empty()
      ? describe(operation_kind::reducescatter, ml::dtype::float32, 0)
      : describe(operation_kind::reducescatter, in[0].type(), in[0].numel());
  d.count = in.size();
  d.op = static_cast<uint8_t>(op);
  g.start(d, true, problem);
  auto bytes = in[0].numel() * ml::size_of(in[0].type());
  // The reduce-scatter leaves rank r with chunk r+1 complete, so chunk p
  // holds tensor p-1: rank r ends with its own tensor r reduced.
  auto& all = g.scratch(3, bytes * n);
  for (size_t p = 0; p < n && bytes > 0; ++p)
    std::memcpy(all.data() + p * bytes, in[(p + n - 1) % n].raw(), bytes);
  ring_run ring{g, all.data(), in[0].type(), in[0].numel() * n,
                "reducescatter"};
  ring.send_chunk(static_cast<size_t>(g.rank()));
  ring.pass(1, true, op, false);
  ring.run();
  out = ml::tensor{in[0].shape(), in[0].type()};
  auto mine = (static_cast<size_t>(g.rank()) + 1) % n;
  if (bytes > 0)
    std::memcpy(out.raw(), all.data() + mine * bytes, bytes);
}

void net_barrier(net_group& g) {
  // Nobody gets past `start` before every member's descriptor came.
  g.start(describe(operation_kind::barrier, ml::dtype::float32, 0), false);
}

void net_send(net_group& g, const char* data, ml::dtype type, size_t numel,
              int dst) {
  auto& l = g.links();
  auto d = describe(operation_kind::send, type, numel);
  d.root = dst;
  l.post_copy(dst, frame_kind::op, &d, sizeof(d));
  l.post(dst, frame_kind::data, data, numel * ml::size_of(type));
  // The receiver answers with its own descriptor once it has the data.
  auto answer = l.read_op(dst, "send");
  l.flush();
  if (answer.invalid)
    throw collective_error(
      "group '" + g.name() + "': rank " + std::to_string(g.rank()) + " sent " +
        std::to_string(numel) + " " + ml::to_string(type) + " elements, rank " +
        std::to_string(dst) + " receives into " + std::to_string(answer.numel) +
        " " + ml::to_string(static_cast<ml::dtype>(answer.type)) +
        " elements; both must agree",
      errc::mismatch);
}

void net_recv(net_group& g, char* data, ml::dtype type, size_t numel, int src) {
  auto& l = g.links();
  auto theirs = l.read_op(src, "recv");
  if (theirs.what != static_cast<uint32_t>(operation_kind::send))
    l.fail("group '" + g.name() + "': rank " + std::to_string(src) +
             " called " + to_string(static_cast<operation_kind>(theirs.what)) +
             " while rank " + std::to_string(g.rank()) +
             " receives from it; every rank must call the same collectives "
             "in the same order",
           errc::mismatch);
  auto d = describe(operation_kind::send, type, numel);
  d.root = g.rank();
  auto type_of = static_cast<ml::dtype>(theirs.type);
  if (theirs.type != static_cast<uint8_t>(type) || theirs.numel != numel) {
    // Taken and dropped, so that the channel stays in step.
    auto bytes = theirs.numel * ml::size_of(type_of);
    l.read_data(src, g.scratch(0, bytes).data(), bytes, "recv");
    d.invalid = 1;
    l.post_copy(src, frame_kind::op, &d, sizeof(d));
    throw collective_error(
      "group '" + g.name() + "': rank " + std::to_string(src) + " sent " +
        std::to_string(theirs.numel) + " " + ml::to_string(type_of) +
        " elements, rank " + std::to_string(g.rank()) + " receives into " +
        std::to_string(numel) + " " + ml::to_string(type) +
        " elements; both must agree",
      errc::mismatch);
  }
  l.read_data(src, data, numel * ml::size_of(type), "recv");
  l.post_copy(src, frame_kind::op, &d, sizeof(d));
}

} // namespace lumen::collective::detail
