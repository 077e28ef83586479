#include "collective/algorithms/ring.hpp"

#include <cstring>

#include "collective/algorithms/algorithms.hpp"

// The ring's three collectives: the all-reduce (reduce-scatter, then
// all-gather), and each half on its own.

namespace lumen::collective::detail {

void ring_allreduce(transport& t, char* data, ml::dtype type, size_t numel,
                    reduce_op op) {
  ring_run ring{t, data, type, numel, "allreduce"};
  // Reduce-scatter: send chunk r, then reduce what comes and pass it on;
  // its last chunk (complete) is the all-gather's first send.
  ring.send_chunk(static_cast<size_t>(t.rank()));
  ring.pass(1, true, op, true);
  // All-gather: copy the complete chunks in as they come round.
  ring.pass(0, false, op, false);
  ring.run();
}

void run_allgather(transport& t, std::vector<ml::tensor>& out,
                   const ml::tensor& in) {
  auto d = describe(operation_kind::allgather, in.type(), in.numel());
  t.start(d, false);
  auto n = static_cast<size_t>(t.world());
  auto bytes = in.numel() * ml::size_of(in.type());
  // Rank q's tensor is chunk q of one buffer; the all-gather moves chunks
  // as the reduce-scatter does, copying instead of reducing.
  auto& all = t.scratch(3, bytes * n);
  if (bytes > 0)
    std::memcpy(all.data() + static_cast<size_t>(t.rank()) * bytes, in.raw(),
                bytes);
  ring_run ring{t, all.data(), in.type(), in.numel() * n, "allgather"};
  ring.send_chunk(static_cast<size_t>(t.rank()));
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

void run_reducescatter(transport& t, ml::tensor& out,
                       const std::vector<ml::tensor>& in, reduce_op op) {
  auto n = static_cast<size_t>(t.world());
  std::string problem;
  if (in.size() != n)
    problem = "rank " + std::to_string(t.rank()) + " passed " +
              std::to_string(in.size()) +
              " tensors; reducescatter takes one tensor per rank (" +
              std::to_string(n) + ") on every rank";
  for (size_t q = 1; q < in.size() && problem.empty(); ++q)
    if (in[q].type() != in[0].type() || in[q].shape() != in[0].shape())
      problem = "tensor " + std::to_string(q) + " of rank " +
                std::to_string(t.rank()) + " is a " + in[q].describe() +
                ", tensor 0 a " + in[0].describe() +
                "; every rank must pass the same shapes";
  auto d =
    in.empty()
      ? describe(operation_kind::reducescatter, ml::dtype::float32, 0)
      : describe(operation_kind::reducescatter, in[0].type(), in[0].numel());
  d.count = in.size();
  d.op = static_cast<uint8_t>(op);
  t.start(d, true, problem);
  auto bytes = in[0].numel() * ml::size_of(in[0].type());
  // The reduce-scatter leaves rank r with chunk r+1 complete, so chunk p
  // holds tensor p-1: rank r ends with its own tensor r reduced.
  auto& all = t.scratch(3, bytes * n);
  for (size_t p = 0; p < n && bytes > 0; ++p)
    std::memcpy(all.data() + p * bytes, in[(p + n - 1) % n].raw(), bytes);
  ring_run ring{t, all.data(), in[0].type(), in[0].numel() * n,
                "reducescatter"};
  ring.send_chunk(static_cast<size_t>(t.rank()));
  ring.pass(1, true, op, false);
  ring.run();
  out = ml::tensor{in[0].shape(), in[0].type()};
  auto mine = (static_cast<size_t>(t.rank()) + 1) % n;
  if (bytes > 0)
    std::memcpy(out.raw(), all.data() + mine * bytes, bytes);
}

} // namespace lumen::collective::detail
