#include "lumen/collective/collective.hpp"

#include <cstring>
#include <utility>

#include "collective/operations.hpp"

// The all-reduce of members in one process, by its two algorithms.

namespace lumen::collective {

using namespace detail;

namespace {

/// Small buffers up to here go `direct`.
constexpr size_t direct_limit = 16 * 1024;

allreduce_algorithm choose(allreduce_algorithm a, size_t bytes) {
  if (a != allreduce_algorithm::automatic)
    return a;
  return bytes <= direct_limit ? allreduce_algorithm::direct
                               : allreduce_algorithm::slices;
}

/// Every rank copies its buffer into the group's staging and meets the
/// others once, quickly where they all come at once; then each reduces all
/// copies in rank order (so all get the same numbers) into its own buffer,
/// and leaves: nobody reads a member's buffer, so nobody waits for the
/// others to finish.
void direct_allreduce(const membership& m, slot s, reduce_op op) {
  auto type = s.type;
  auto numel = s.numel;
  char* data = s.data;
  auto bytes = numel * ml::size_of(type);
  auto& group = *m.group;
  auto round = group.next_round(m.rank);
  if (bytes > 0)
    std::memcpy(group.staging(m.rank, round, bytes), data, bytes);
  slot_check same = [](const std::vector<slot>& all) {
    return check_same(all, true);
  };
  if (!group.start_quickly(m.rank, s, same))
    group.start(m.rank, std::move(s), same);
  if (bytes == 0)
    return;
  thread_local std::vector<const char*> copies;
  copies.resize(static_cast<size_t>(group.world()));
  for (int q = 0; q < group.world(); ++q)
    copies[static_cast<size_t>(q)] = group.staged(q, round);
  reduce_in_rank_order(copies, data, type, numel, op);
}

/// Runs `step` of started all-reduce `call` (whether it is done), ending
/// its flight record once it is done or failed.
template <class Step>
bool recorded(transport& t, uint64_t call, Step step) {
  try {
    bool done = step();
    if (done)
      t.end_call(call, false);
    return done;
  } catch (...) {
    t.end_call(call, true);
    throw;
  }
}

void allreduce_in_place(const membership& m, char* data, ml::dtype type,
                        size_t numel, reduce_op op, const call_site& site) {
  op_span span{"allreduce", m, numel * ml::size_of(type), site};
  if (!m.group)
    return run_allreduce(*m.over, m.over->algorithm(), data, type, numel, op);
  auto s = slot_of(*m.over, data, type, numel, operation_kind::allreduce);
  s.op = op;
  s.algorithm = choose(m.group->algorithm(), numel * ml::size_of(type));
  if (s.algorithm == allreduce_algorithm::direct)
    return direct_allreduce(m, std::move(s), op);
  auto rank = static_cast<size_t>(m.rank);
  // Each rank reduces its own slice over every member's buffer and writes
  // it into all of them (nobody else touches that slice of any); the
  // meeting after it keeps every buffer alive until all are written.
  m.group->run(
    m.rank, std::move(s),
    [](const std::vector<slot>& all) { return check_same(all, true); },
    [&](const std::vector<slot>& all) {
      reduce_slice_everywhere(all, rank, numel, type, op);
    });
}

} // namespace

const char* to_string(allreduce_algorithm a) noexcept {
  switch (a) {
    case allreduce_algorithm::automatic:
      return "automatic";
    case allreduce_algorithm::slices:
      return "slices";
    case allreduce_algorithm::direct:
      return "direct";
    case allreduce_algorithm::ring:
      return "ring";
    case allreduce_algorithm::halving_doubling:
      return "halving_doubling";
    case allreduce_algorithm::recursive_doubling:
      return "recursive_doubling";
    case allreduce_algorithm::naive:
      return "naive";
  }
  return "unknown";
}

void set_algorithm(const std::string& group, allreduce_algorithm a) {
  auto& m = member_of(group);
  bool threads_only = a == allreduce_algorithm::slices;
  bool processes_only = a == allreduce_algorithm::ring ||
                        a == allreduce_algorithm::halving_doubling ||
                        a == allreduce_algorithm::recursive_doubling ||
                        a == allreduce_algorithm::naive;
  bool apart = !m.group;
  if ((apart && threads_only) || (!apart && processes_only))
    throw collective_error(
      "group '" + group + "' has no algorithm '" + to_string(a) + "': " +
        (apart ? "across processes it has ring, halving_doubling, "
                 "recursive_doubling, direct and naive"
               : "in one process it has slices and direct"),
      errc::usage);
  if (apart)
    m.over->set_algorithm(a);
  else
    m.group->set_algorithm(a);
}

allreduce_algorithm algorithm_for(const std::string& group, size_t bytes) {
  auto& m = member_of(group);
  if (!m.group)
    return choose_algorithm(m.over->algorithm(), bytes, m.over->world());
  return choose(m.group->algorithm(), bytes);
}

void allreduce(ml::tensor& buf, const std::string& group, reduce_op op,
               call_site site) {
  allreduce_in_place(settled(group), buf.raw(), buf.type(), buf.numel(), op,
                     site);
}

void allreduce(std::vector<float>& buf, const std::string& group, reduce_op op,
               call_site site) {
  allreduce_in_place(settled(group), bytes_of(buf), ml::dtype::float32,
                     buf.size(), op, site);
}

ObjectRef<void> allreduce_async(ml::tensor& buf, const std::string& group,
                                reduce_op op, call_site site) {
  // A copy of the handle shares the storage, and keeps it alive.
  return later(group, [site, b = buf, op](const membership& m) mutable {
    allreduce_in_place(m, b.raw(), b.type(), b.numel(), op, site);
  });
}

ObjectRef<void> allreduce_async(std::vector<float>& buf,
                                const std::string& group, reduce_op op,
                                call_site site) {
  return later(group, [site, b = &buf, op](const membership& m) {
    allreduce_in_place(m, bytes_of(*b), ml::dtype::float32, b->size(), op,
                       site);
  });
}

namespace {

/// The shared segment of the member's group (opened, with the others, at
/// the first call that `wants` it), with its lane's queued operations done
/// first; nullptr where the members share no memory, or not wanted.
host_segment* shared_segment(membership& m, bool wants = true) {
  if (m.lane)
    m.lane->drain();
  return wants && m.net && m.net->world() > 1 ? m.net->segment() : nullptr;
}

} // namespace

started_allreduce allreduce_start(float* data, size_t numel,
                                  const std::string& group, reduce_op op,
                                  call_site site) {
  return allreduce_start(data, data, numel, group, op, site);
}

started_allreduce allreduce_start(const float* in, float* out, size_t numel,
                                  const std::string& group, reduce_op op,
                                  call_site site) {
  started_allreduce started;
  auto bytes = numel * sizeof(float);
  auto at = [](const float* p) { return reinterpret_cast<uintptr_t>(p); };
  if (in != out && at(in) < at(out) + bytes && at(out) < at(in) + bytes)
    throw collective_error(
      "group '" + group +
        "': allreduce_start's input and output overlap "
        "without being the same; give one buffer for in place, or two "
        "apart",
      errc::usage);
  auto& m = member_of(group);
  if (auto* segment = shared_segment(m, bytes <= host_segment::region_bytes)) {
    m.net->begin_call(site, "allreduce_start", bytes);
    started.call_ = m.net->calls();
    started.net_ = m.net;
    recorded(*m.net, started.call_, [&] {
      started.seq_ = segment->start(
        reinterpret_cast<const char*>(in), reinterpret_cast<char*>(out),
        ml::dtype::float32, numel, op, site, started.call_);
      return false;
    });
    return started;
  }
  if (in != out)
    std::memcpy(out, in, bytes);
  started.ref_ = later(group, [site, out, numel, op](const membership& who) {
    allreduce_in_place(who, reinterpret_cast<char*>(out), ml::dtype::float32,
                       numel, op, site);
  });
  return started;
}

allreduce_buffer::allreduce_buffer(size_t numel, const std::string& group)
  : numel_(numel) {
  auto& m = member_of(group);
  if (auto* segment = shared_segment(m))
    if (auto* place = segment->keep(numel * sizeof(float))) {
      net_ = m.net;
      data_ = reinterpret_cast<float*>(place);
      return;
    }
  own_.resize(numel);
  data_ = own_.data();
}

allreduce_buffer::~allreduce_buffer() {
  give_back();
}

allreduce_buffer::allreduce_buffer(allreduce_buffer&& other) noexcept {
  *this = std::move(other);
}

allreduce_buffer&
allreduce_buffer::operator=(allreduce_buffer&& other) noexcept {
  if (this != &other) {
    give_back();
    net_ = std::move(other.net_);
    own_ = std::move(other.own_);
    data_ = std::exchange(other.data_, nullptr);
    numel_ = std::exchange(other.numel_, 0);
  }
  return *this;
}

void allreduce_buffer::reuse() {
  if (net_)
    net_->open_segment()->wait_read(reinterpret_cast<const char*>(data_));
}

void allreduce_buffer::give_back() noexcept {
  if (!net_)
    return;
  auto* segment = net_->open_segment();
  try {
    // The others may still read it.
    segment->wait_read(reinterpret_cast<const char*>(data_));
  } catch (const collective_error&) {
    // A broken group reads nothing more.
  }
  segment->release(reinterpret_cast<const char*>(data_));
  net_.reset();
}

bool started_allreduce::test() {
  if (net_)
    return recorded(*net_, call_, [&] {
      return net_->open_segment()->progress(seq_, false);
    });
  return ref_.ready();
}

void started_allreduce::wait() {
  if (net_) {
    recorded(*net_, call_,
             [&] { return net_->open_segment()->progress(seq_, true); });
    return;
  }
  lumen::get(ref_);
}

} // namespace lumen::collective
