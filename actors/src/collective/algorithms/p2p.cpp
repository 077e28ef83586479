#include "collective/algorithms/algorithms.hpp"

// send and recv: the sender's descriptor and data, then the receiver's
// answer once it has them (or refused them), so that both fail alike.

namespace lumen::collective::detail {

void run_send(transport& t, const char* data, ml::dtype type, size_t numel,
              int dst) {
  auto d = describe(operation_kind::send, type, numel);
  d.root = dst;
  t.post_op(dst, d);
  t.post(dst, data, numel * ml::size_of(type));
  // The receiver answers with its own descriptor once it has the data.
  auto answer = t.recv_op(dst, "send");
  t.flush();
  if (answer.invalid)
    throw collective_error(
      "group '" + t.name() + "': rank " + std::to_string(t.rank()) + " sent " +
        std::to_string(numel) + " " + ml::to_string(type) + " elements, rank " +
        std::to_string(dst) + " receives into " + std::to_string(answer.numel) +
        " " + ml::to_string(static_cast<ml::dtype>(answer.type)) +
        " elements; both must agree",
      errc::mismatch);
}

void run_recv(transport& t, char* data, ml::dtype type, size_t numel, int src) {
  auto theirs = t.recv_op(src, "recv");
  if (theirs.what != static_cast<uint32_t>(operation_kind::send))
    t.fail("group '" + t.name() + "': rank " + std::to_string(src) +
             " called " + to_string(static_cast<operation_kind>(theirs.what)) +
             " while rank " + std::to_string(t.rank()) +
             " receives from it; every rank must call the same collectives "
             "in the same order",
           errc::mismatch);
  auto d = describe(operation_kind::send, type, numel);
  d.root = t.rank();
  auto type_of = static_cast<ml::dtype>(theirs.type);
  if (theirs.type != static_cast<uint8_t>(type) || theirs.numel != numel) {
    // Taken and dropped, so that the channel stays in step.
    auto bytes = theirs.numel * ml::size_of(type_of);
    t.recv(src, t.scratch(0, bytes).data(), bytes, "recv");
    d.invalid = 1;
    t.post_op(src, d);
    throw collective_error(
      "group '" + t.name() + "': rank " + std::to_string(src) + " sent " +
        std::to_string(theirs.numel) + " " + ml::to_string(type_of) +
        " elements, rank " + std::to_string(t.rank()) + " receives into " +
        std::to_string(numel) + " " + ml::to_string(type) +
        " elements; both must agree",
      errc::mismatch);
  }
  t.recv(src, data, numel * ml::size_of(type), "recv");
  t.post_op(src, d);
}

} // namespace lumen::collective::detail
