#pragma once

// A worker's state and its two halves: the gradients, computed one after
// another on a thread of the worker's own (data_parallel_worker.cpp), and
// the train loop against a server's shards (worker_training.cpp).

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <caf/atom.hpp>
#include <caf/typed_response_promise.hpp>

#include "lumen/ml/batch_stream.hpp"
#include "lumen/util/work_queue.hpp"

#include "workers/worker_actor.hpp"

namespace lumen::ml::detail {

using done_atom = caf::atom_constant<caf::atom("lmwdone")>;

using seconds = std::chrono::duration<double>;

/// One gradient, as the compute thread hands it to the actor.
struct step_result {
  std::vector<compressed> parts; // one per shard of the server
  float loss = 0;
  uint64_t epoch = 0;
  double compute = 0, wait = 0, slow = 0;
  std::string error; // set if the step failed
};

/// The compute thread's own things: only it touches them once spawned.
struct replica {
  worker_config cfg;
  std::unique_ptr<model> net;
  std::unique_ptr<batch_stream> batches;
  std::vector<error_feedback> feedback; // one per shard
  std::mt19937_64 draws;
  std::vector<float> grad;

  /// A gradient at `weights` on the next batch, cut into the ranges of
  /// `shards` shards and compressed, slowed down as configured.
  void step(const tensor& weights, size_t shards, step_result& out);
};

/// A worker's state. Gradients are computed on its own thread, one after
/// another; the thread tells the worker when one is done, and the worker
/// goes on from its own context, as CAF wants.
struct worker_state {
  std::shared_ptr<replica> rep;
  worker_report report;
  // What to do with each gradient under way, in the order they were asked.
  std::deque<
    std::pair<std::shared_ptr<step_result>, std::function<void(step_result&)>>>
    next;
  // train: the server's shards, their versions, the version to reach,
  // the caller to answer.
  std::vector<parameter_server> shards;
  std::vector<uint64_t> versions;
  // train: the replica, the shards' weights joined, updated by their
  // answers; `own` once no message shares its numbers (changes are added
  // in place).
  tensor held;
  bool own = false;
  std::vector<float> scratch;
  uint64_t until = 0;
  caf::typed_response_promise<worker_report> trained;
  bool training = false;
  // Last: its destructor lets what is queued finish, then joins.
  std::unique_ptr<util::work_queue> lane = std::make_unique<util::work_queue>();
};

/// What a step on a batch of `batch` rows costs in a simulated run, as
/// virtual seconds of compute: a forward and a backward pass, about 6
/// floating-point operations a parameter and row, at 10 GFLOP/s (one core
/// of a server), before the node's slowness.
double simulated_step_seconds(const model& net, uint64_t batch);

/// Computes a gradient at `weights` on the worker's thread, cut for
/// `shards` shards; `then` gets it in the worker's context.
void compute(worker_pointer self, tensor weights, size_t shards,
             std::function<void(step_result&)> then);

/// Adds a computed step to the worker's counts.
void count(worker_report& r, const step_result& s);

/// Starts a train against `shards` (one server: one shard) until the
/// server reaches version `until`.
caf::typed_response_promise<worker_report>
start_training(worker_pointer self, std::vector<parameter_server> shards,
               uint64_t until);

/// Ends the train under way: its caller gets the report, or `err`.
void finish(worker_pointer self, caf::error err);

} // namespace lumen::ml::detail
