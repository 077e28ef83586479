#pragma once

// Collectives, like ray.util.collective: each member of a group (a Lumen
// actor, a task, a thread) calls them on its own buffer, in place.
//
//   lumen::collective::init_group(4, rank, "grads");
//   lumen::collective::allreduce(grad, "grads", reduce_op::average);
//
// Each operation has an _async form returning an ObjectRef<void> that is
// ready once the operation is done on this member (a training loop goes on
// with its backward pass meanwhile). The member's _async operations run in
// the order they were asked for, on a thread of the member's own, and a
// blocking call waits for them first. Tensors are held by the operation
// (a handle shares the storage); a std::vector buffer and the outputs
// (`out`) must stay alive, and all of them untouched, until the ref is
// ready.
//
// Membership belongs to the calling thread, which is what a Lumen actor
// runs on: one process may hold several members of a group. Members in
// one process read each other's buffers directly (no bytes on a wire):
// each reduces its own slice of the buffer over all members' memory and
// writes it into every member's buffer. Every member gets bit-identical
// results, whatever the reduction's rounding.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <lumen/actor.hpp>
#include <lumen/errors.hpp>
#include <lumen/object_ref.hpp>
#include <lumen/object_store.hpp>

#include "lumen/collective/ring.hpp"
#include "lumen/ml/tensor.hpp"

namespace lumen::collective {

namespace detail {
class net_group;
} // namespace detail

/// A collective could not run. The message names the group and the ranks;
/// `code()` says which kind of failure it is:
/// - `errc::usage`: a call that cannot be right (an unknown or destroyed
///   group, a rank out of range, a bad timeout, an unknown algorithm);
/// - `errc::mismatch`: the members disagree (world size, lengths, element
///   types, a rank claimed twice);
/// - `errc::timeout`: a member did not come in time;
/// - `errc::peer_lost`: a member died, left, or lost its link mid-operation.
class collective_error : public error {
public:
  collective_error(const std::string& what, errc code)
    : error(what, code) {}
};

/// Where a collective was called from: the compiler fills it in at the
/// caller (every call's last, defaulted, argument), and every error of the
/// call names it with its sequence number in the group, for each side
/// ("rank 1: train.cpp:48, operation 17").
struct call_site {
  const char* file = "";
  uint32_t line = 0;

  static call_site here(const char* file = __builtin_FILE(),
                        uint32_t line = __builtin_LINE()) noexcept {
    return {file, line};
  }
};

/// How long a member waits for the others to start an operation (or, in
/// a group across processes, for any step of it) before it fails with
/// `collective_error` (default 30 s). Called before `init_group`, it sets
/// the time the next member of `group` in this process waits for the
/// others to join. Throws `collective_error` unless it is positive.
void set_timeout(const std::string& group, std::chrono::milliseconds timeout);

/// The flight recorder: each member keeps its last `operations`
/// operations (default 64, or $LUMEN_FLIGHT_RECORDER; 0 turns it off),
/// for groups joined after the call. A member that times out or loses a
/// peer gathers the records of every member that still answers, writes
/// them as JSON (flight-GROUP.json) and names in its error the file and
/// the members that are behind; SIGUSR1 writes the records of every member
/// in the process (flight-pidPID.json), and `lumen doctor` shows them for
/// a running cluster.
void set_flight_recorder(size_t operations);

/// The folder records are written to (default $LUMEN_FLIGHT_RECORDS, else
/// ~/.lumen/flight); the trainer uses its --storage.
void set_flight_records_dir(const std::string& dir);

/// Writes the records of every member in this process now, with `why`;
/// returns the file's path. Throws std::runtime_error if it cannot.
std::string write_flight_records(const std::string& why = "asked");

/// What `lumen doctor` shows, as JSON: for every group across processes
/// in the cluster (or `group` alone), each member's records as it answers
/// within `timeout` (the operation it is in, or how long it has been
/// outside any collective; its last operations), the members behind the
/// one furthest on, and those that did not answer.
std::string examine_groups(const std::string& group,
                           std::chrono::milliseconds timeout);

/// A member's records (one of examine_groups' members, as JSON) in
/// words: "in allreduce at train.cpp:42 (operation 17) for 3.1 s, waiting
/// for rank 2", or "outside any collective for 10.2 s, last called
/// barrier at train.cpp:40 as operation 16".
std::string describe_member_text(const std::string& member_json);

/// How an all-reduce runs.
///   In one process: `slices`, each member reduces its slice over
///   everyone's buffer and writes it into all of them (two meetings, each
///   member reducing 1/N of the data: for large buffers); `direct`, each
///   member copies its buffer aside and reduces everyone's copies into its
///   own (one meeting, N times the arithmetic: for small buffers).
///   Across processes: `ring`, reduce-scatter then all-gather round a
///   ring, 2·S·(N-1)/N bytes sent per member (for large buffers);
///   `halving_doubling` (Rabenseifner's; power-of-two groups only), the
///   same bytes in 2·log2(N) pairwise steps instead of 2(N-1) (for
///   medium buffers); `recursive_doubling` (power-of-two groups only),
///   partners swap and reduce whole partial results, log2(N) steps, S
///   bytes each (for small buffers);
///   `direct`, every member sends its buffer to every other and reduces
///   all N (one step: for small buffers); `naive`, gather to rank 0,
///   reduce there, broadcast back (the baseline the ring is measured
///   against).
/// `automatic` (the default) takes `direct` up to 16 KiB in one process,
/// `slices` above; across processes, in a power-of-two group of more
/// than two, `recursive_doubling` up to 64 KiB, `halving_doubling` up to
/// 1 MiB, `ring` above; in other groups `direct` up to 64 KiB, `ring`
/// above.
enum class allreduce_algorithm {
  automatic,
  slices,
  direct,
  ring,
  halving_doubling,
  recursive_doubling,
  naive
};

/// "automatic", "slices", "direct", "ring", "halving_doubling",
/// "recursive_doubling", "naive".
const char* to_string(allreduce_algorithm a) noexcept;

/// Forces the algorithm for this member (in one process: for all the
/// group's members here). Every member must use the same one. Throws
/// `collective_error` for an algorithm the group's backend does not have.
void set_algorithm(const std::string& group, allreduce_algorithm a);

/// The algorithm an all-reduce of `bytes` bytes over `group` uses.
allreduce_algorithm algorithm_for(const std::string& group, size_t bytes);

/// Where a group's members are and how they reach each other.
///   `threads`: all in this process, each a thread (a Lumen actor, a
///   task); they read each other's buffers, nothing is copied to a wire.
///   `processes`: anywhere in the cluster, one channel (lumen/channel.hpp)
///   between each pair; they meet by group name through the head. Members
///   in one process may use it too (over loopback).
///   `automatic`: `processes` once this process is in a cluster (it called
///   lumen::init with an address, or it is a node), `threads` otherwise.
enum class backend { automatic, threads, processes };

/// Makes the calling thread rank `rank` of the group `group` of
/// `world_size` members. Throws `collective_error` if the rank is out of
/// range or taken, or the group exists with another size. With the
/// `processes` backend it returns once every member joined (or throws,
/// naming who did not come within the timeout).
void init_group(int world_size, int rank, const std::string& group,
                backend where = backend::automatic);

/// Leaves the group; once every member left it, the name is free for a
/// new group. Members still inside an operation fail. In a group made
/// with `create_group`, the first member to leave also withdraws the
/// declaration, as Ray's destroy_collective_group does.
void destroy_group(const std::string& group);

/// `create_group` for the actors of ids `actor_ids` (ActorHandle::id).
void declare_group(const std::vector<std::string>& actor_ids,
                   const std::string& group,
                   backend where = backend::automatic);

/// Ray's declarative form (create_collective_group), called from a driver:
/// makes the actors `members` the group `group`, `members[i]` its rank i,
/// on the backend `where`. No member calls init_group: each joins when
/// one of its methods first uses `group`. The declaration is kept in the
/// cluster's key-value store (lumen/kv.hpp) until a member destroys the
/// group. Throws `collective_error` if `group` is declared already or an
/// actor is listed twice.
template <class C>
void create_group(const std::vector<ActorHandle<C>>& members,
                  const std::string& group,
                  backend where = backend::automatic) {
  std::vector<std::string> ids;
  ids.reserve(members.size());
  for (auto& m : members)
    ids.push_back(m.id());
  declare_group(ids, group, where);
}

/// The backend the calling thread's membership of `group` uses
/// (`threads` or `processes`).
backend backend_of(const std::string& group);

/// Bytes of data this member sent and received in `group` since it joined
/// (operations' buffers, not frame headers; zero in a `threads` group,
/// whose members read each other's memory).
struct traffic {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
};
traffic traffic_of(const std::string& group);

bool is_group_initialized(const std::string& group);
int get_rank(const std::string& group);
int get_world_size(const std::string& group);

/// Reduces every member's `buf` with `op`; every member ends with the
/// result. Buffers must agree in dtype and length on all ranks.
void allreduce(ml::tensor& buf, const std::string& group,
               reduce_op op = reduce_op::sum,
               call_site site = call_site::here());
void allreduce(std::vector<float>& buf, const std::string& group,
               reduce_op op = reduce_op::sum,
               call_site site = call_site::here());
ObjectRef<void> allreduce_async(ml::tensor& buf, const std::string& group,
                                reduce_op op = reduce_op::sum,
                                call_site site = call_site::here());
ObjectRef<void> allreduce_async(std::vector<float>& buf,
                                const std::string& group,
                                reduce_op op = reduce_op::sum,
                                call_site site = call_site::here());

/// An all-reduce started by allreduce_start, which the thread that
/// started it moves on itself (MPI's Iallreduce and Test): `test` between
/// pieces of other work, `wait` at the end.
class started_allreduce {
public:
  started_allreduce() = default;

  bool valid() const noexcept {
    return seq_ > 0 || ref_.valid();
  }

  /// Moves this member's started all-reduces on as far as they go
  /// without waiting; true once this one is done here.
  bool test();

  /// Returns once it is done here; throws collective_error as allreduce
  /// does.
  void wait();

private:
  friend started_allreduce allreduce_start(const float*, float*, size_t,
                                           const std::string&, reduce_op,
                                           call_site);

  std::shared_ptr<detail::net_group> net_; // the members' shared memory
  uint64_t seq_ = 0;
  uint64_t call_ = 0;   // the member's count of it, for its flight record
  ObjectRef<void> ref_; // or the member's lane
};

/// Starts an all-reduce of the `numel` floats at `data`, in place; they
/// must stay alive and untouched until it is done. Members of a group
/// across processes of one machine meet in shared memory, and the calling
/// thread does the work, in `test` and `wait`: no hand-off to another
/// thread, which is what a backward pass on a busy machine needs. Members
/// elsewhere go over their channels on the member's lane, as
/// allreduce_async does. Where /dev/shm cannot hold the copy of `data`
/// (a container's 64 MB), the group fails with a collective_error naming
/// the fix. Any other operation of the group first finishes
/// the member's started all-reduces. For a gradient in buckets:
///   auto a = allreduce_start(grad + b, n, "ddp", reduce_op::average);
///   ... a.test() between layers ...; a.wait();
started_allreduce allreduce_start(float* data, size_t numel,
                                  const std::string& group,
                                  reduce_op op = reduce_op::sum,
                                  call_site site = call_site::here());

/// As allreduce_start, but the result goes to `out` and `in` stays as it
/// was (the two must not overlap). Where `in` lies in an
/// allreduce_buffer of the group, it is read there: no copy.
started_allreduce allreduce_start(const float* in, float* out, size_t numel,
                                  const std::string& group,
                                  reduce_op op = reduce_op::sum,
                                  call_site site = call_site::here());

/// Memory for what allreduce_start takes again and again (a gradient,
/// step after step), read where it lies: on a group whose members share
/// this machine, a place in their shared memory (up to 64 MiB a member,
/// as /dev/shm has room), which takes the copy into it out of every
/// allreduce_start from there; elsewhere, ordinary memory. Every member makes
/// its buffers at the same point of its calls to the group, as a collective,
/// and calls `reuse` before it writes one again:
///   allreduce_buffer staged{numel, "ddp"};
///   staged.reuse(); ... the gradient written to staged.data() ...
///   allreduce_start(staged.data(), mean, numel, "ddp", reduce_op::average)
class allreduce_buffer {
public:
  allreduce_buffer() = default;
  allreduce_buffer(size_t numel, const std::string& group);
  ~allreduce_buffer();
  allreduce_buffer(allreduce_buffer&& other) noexcept;
  allreduce_buffer& operator=(allreduce_buffer&& other) noexcept;

  float* data() noexcept {
    return data_;
  }
  size_t size() const noexcept {
    return numel_;
  }
  /// True if the buffer lies in the members' shared memory.
  bool shared() const noexcept {
    return net_ != nullptr;
  }

  /// Returns once every member is done with the all-reduces this member
  /// started from the buffer, so that it may be written again (the
  /// all-reduces from another buffer may go on: a model can write its
  /// next gradient to a second buffer while the last is read); throws
  /// collective_error as allreduce does.
  void reuse();

private:
  void give_back() noexcept;

  std::shared_ptr<detail::net_group> net_; // whose shared memory it is in
  std::vector<float> own_;                 // or ordinary memory
  float* data_ = nullptr;
  size_t numel_ = 0;
};

/// As allreduce, but only rank `dst_rank` gets the result; the others'
/// buffers stay as they were.
void reduce(ml::tensor& buf, int dst_rank, const std::string& group,
            reduce_op op = reduce_op::sum, call_site site = call_site::here());
ObjectRef<void> reduce_async(ml::tensor& buf, int dst_rank,
                             const std::string& group,
                             reduce_op op = reduce_op::sum,
                             call_site site = call_site::here());

/// Every member's `buf` becomes rank `src_rank`'s.
void broadcast(ml::tensor& buf, int src_rank, const std::string& group,
               call_site site = call_site::here());
void broadcast(std::vector<float>& buf, int src_rank, const std::string& group,
               call_site site = call_site::here());
ObjectRef<void> broadcast_async(ml::tensor& buf, int src_rank,
                                const std::string& group,
                                call_site site = call_site::here());

/// `out` becomes every rank's `in`, in rank order (same dtype and shape on
/// all ranks).
void allgather(std::vector<ml::tensor>& out, const ml::tensor& in,
               const std::string& group, call_site site = call_site::here());
ObjectRef<void> allgather_async(std::vector<ml::tensor>& out, ml::tensor in,
                                const std::string& group,
                                call_site site = call_site::here());

/// `in` holds one tensor per rank; rank r's `out` becomes the reduction of
/// every member's `in[r]`.
void reducescatter(ml::tensor& out, const std::vector<ml::tensor>& in,
                   const std::string& group, reduce_op op = reduce_op::sum,
                   call_site site = call_site::here());
ObjectRef<void> reducescatter_async(ml::tensor& out, std::vector<ml::tensor> in,
                                    const std::string& group,
                                    reduce_op op = reduce_op::sum,
                                    call_site site = call_site::here());

/// Sends `buf` to rank `dst_rank`, returning once it received it; the
/// receiver's buffer must have the same dtype and length.
void send(const ml::tensor& buf, int dst_rank, const std::string& group,
          call_site site = call_site::here());
void send(const std::vector<float>& buf, int dst_rank, const std::string& group,
          call_site site = call_site::here());

/// Receives into `buf` what rank `src_rank` sends.
void recv(ml::tensor& buf, int src_rank, const std::string& group,
          call_site site = call_site::here());
void recv(std::vector<float>& buf, int src_rank, const std::string& group,
          call_site site = call_site::here());

/// Returns once every member called it.
void barrier(const std::string& group, call_site site = call_site::here());
ObjectRef<void> barrier_async(const std::string& group,
                              call_site site = call_site::here());

} // namespace lumen::collective
