#include "collective/transport.hpp"

#include "collective/recorder.hpp"

#include <algorithm>
#include <cstring>

namespace lumen::collective::detail {

namespace {

std::string describe(const op_descriptor& d) {
  std::string out;
  if (d.count > 0)
    out += std::to_string(d.count) + " tensors of ";
  return out + std::to_string(d.numel) + " " +
         ml::to_string(static_cast<ml::dtype>(d.type)) + " elements to " +
         to_string(static_cast<operation_kind>(d.what));
}

} // namespace

void call_site_text(const call_site& site, char (&out)[48]) noexcept {
  // On every operation's descriptor: no formatting library, the file's
  // name cut to leave room for ':' and ten digits.
  const char* name = site.file != nullptr ? site.file : "";
  if (auto* slash = std::strrchr(name, '/'))
    name = slash + 1;
  auto n = std::min(std::strlen(name), sizeof(out) - 12);
  std::memcpy(out, name, n);
  out[n++] = ':';
  char digits[10];
  size_t k = 0;
  auto line = site.line;
  do {
    digits[k++] = char('0' + line % 10);
    line /= 10;
  } while (line > 0);
  while (k > 0)
    out[n++] = digits[--k];
  std::memset(out + n, 0, sizeof(out) - n);
}

std::string called_at(int rank, const char* site, uint64_t seq) {
  // A descriptor's site comes off the wire: at most its 48 bytes.
  std::string where{site, ::strnlen(site, 48)};
  return "rank " + std::to_string(rank) + " called at " +
         (where.empty() ? "an unknown place" : where) + " as operation " +
         std::to_string(seq);
}

std::string called_at(int rank, const call_site& site, uint64_t seq) {
  char text[48];
  call_site_text(site, text);
  return called_at(rank, text, seq);
}

void transport::record_begin(const char* what, uint64_t bytes) noexcept {
  recorder_->begin(what, calls_, site_, bytes);
}

void transport::record_end(uint64_t seq, bool failed) noexcept {
  recorder_->end(seq, failed);
}

const char* to_string(operation_kind k) noexcept {
  switch (k) {
    case operation_kind::allreduce:
      return "allreduce";
    case operation_kind::reduce:
      return "reduce";
    case operation_kind::broadcast:
      return "broadcast";
    case operation_kind::allgather:
      return "allgather";
    case operation_kind::reducescatter:
      return "reducescatter";
    case operation_kind::barrier:
      return "barrier";
    case operation_kind::send:
      return "send/recv";
  }
  return "an unknown operation";
}

void agree_all_to_all(
  transport& t, const op_descriptor& mine, bool same_op,
  const std::string& problem,
  const std::function<void(int peer, const op_descriptor& mine)>& send) {
  auto n = t.world();
  auto r = t.rank();
  for (int k = 1; k < n; ++k)
    send((r + k) % n, mine);
  auto doing = to_string(static_cast<operation_kind>(mine.what));
  // Every descriptor is read, whatever the first one said, so that the
  // links stay in step and the group can go on after a refused call.
  std::string why = problem;
  std::vector<uint64_t> payloads(static_cast<size_t>(n), 0);
  for (int k = 1; k < n; ++k) {
    int p = (r - k + n) % n;
    auto theirs = t.recv_op(p, doing);
    payloads[static_cast<size_t>(p)] = theirs.inline_bytes;
    if (why.empty())
      why = disagreement(theirs, p, mine, r, same_op);
  }
  if (why.empty())
    return;
  for (int p = 0; p < n; ++p)
    if (auto bytes = payloads[static_cast<size_t>(p)]; bytes > 0)
      t.recv(p, t.scratch(0, bytes).data(), bytes, doing);
  t.flush(); // our payload is out before the caller's buffer moves on
  throw collective_error("group '" + t.name() + "': " + why,
                         problem.empty() ? errc::mismatch : errc::usage);
}

void transport::start_then_rounds(
  const op_descriptor& mine, bool same_op, const std::string& problem,
  const doubling_data* data,
  const std::function<void(int peer, const char* bytes, size_t n)>& send_copy) {
  start(mine, same_op, problem);
  if (data == nullptr)
    return;
  for (int d = 1; d < world(); d *= 2) {
    int p = rank() ^ d;
    auto [bytes, n] = data->send();
    send_copy(p, bytes, n);
    // The members agreed, so the partner's round is as long as this one's.
    data->take(p, n, true);
  }
}

namespace {

std::string why_they_differ(const op_descriptor& theirs, int p,
                            const op_descriptor& mine, int me_rank,
                            bool same_op) {
  auto who = "rank " + std::to_string(p);
  auto me = "rank " + std::to_string(me_rank);
  if (theirs.what != mine.what)
    return who + " called " +
           to_string(static_cast<operation_kind>(theirs.what)) + " while " +
           me + " called " + to_string(static_cast<operation_kind>(mine.what)) +
           "; every rank must call the same collective in the same order";
  if (theirs.type != mine.type || theirs.numel != mine.numel ||
      theirs.count != mine.count)
    return who + " passed " + describe(theirs) + ", " + me + " passed " +
           describe(mine) + "; every rank must pass the same dtype and length";
  if (same_op && theirs.op != mine.op)
    return who + " asked for " + to_string(static_cast<reduce_op>(theirs.op)) +
           ", " + me + " for " + to_string(static_cast<reduce_op>(mine.op));
  if (theirs.root != mine.root)
    return who + " named rank " + std::to_string(theirs.root) +
           " as the root, " + me + " named rank " + std::to_string(mine.root);
  if (theirs.algorithm != mine.algorithm)
    return who + " all-reduces " +
           to_string(static_cast<allreduce_algorithm>(theirs.algorithm)) +
           ", " + me + " " +
           to_string(static_cast<allreduce_algorithm>(mine.algorithm)) +
           "; every member must use the same algorithm";
  if (theirs.invalid)
    return who + " refused its own input to " +
           to_string(static_cast<operation_kind>(mine.what)) +
           " (its error says why)";
  return {};
}

} // namespace

std::string disagreement(const op_descriptor& theirs, int p,
                         const op_descriptor& mine, int me_rank, bool same_op) {
  auto why = why_they_differ(theirs, p, mine, me_rank, same_op);
  if (why.empty())
    return why;
  return why + "; " + called_at(p, theirs.site, theirs.seq) + ", " +
         called_at(me_rank, mine.site, mine.seq);
}

} // namespace lumen::collective::detail
