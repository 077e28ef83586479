#pragma once

// The algorithms of the exercises under a simulated clock: virtual time,
// seeded randomness, no threads, no CAF. The browser playground runs them
// (CAF cannot go to the browser), and so do the native tests, so that
// what a learner watches on the page is what the tests check. Each run is
// the same for the same configuration and seed.
//
// The cores are the real ones: the ring's schedule and reductions
// (ring.hpp), the parameter server's rules (ps_core.hpp) with its
// optimizer and codecs, and the models (models.hpp). What is simulated is
// only the time things take (compute, links), drawn from the seed.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "lumen/collective/ring.hpp"
#include "lumen/ml/codec.hpp"
#include "lumen/ml/compress.hpp"
#include "lumen/ml/data.hpp"
#include "lumen/ml/models.hpp"
#include "lumen/ml/optimizer.hpp"
#include "lumen/ml/ps_core.hpp"
#include "lumen/train/buckets.hpp"

namespace lumen::ml::sim {

/// Events in virtual time: each runs at its time, ties in the order they
/// were scheduled, so that a run never depends on a real clock.
class scheduler {
public:
  explicit scheduler(uint64_t seed)
    : rng_(seed) {}

  /// The virtual time (ms) of the event running, or of the last one.
  double now() const noexcept {
    return now_;
  }

  void after(double delay_ms, std::function<void()> f);

  /// Runs the next event; false if there is none.
  bool run_next();

  bool idle() const noexcept {
    return queue_.empty();
  }

  /// A draw in [0, 1) from the seed, the same on every standard library.
  double uniform() noexcept;

private:
  struct event {
    double at;
    uint64_t order;
    std::function<void()> run;
    bool operator>(const event& other) const noexcept {
      return at != other.at ? at > other.at : order > other.order;
    }
  };
  std::priority_queue<event, std::vector<event>, std::greater<event>> queue_;
  double now_ = 0;
  uint64_t scheduled_ = 0;
  std::mt19937_64 rng_;
};

// ---- ml_scratch03: the ring all-reduce ---------------------------------

struct ring_config {
  size_t ranks = 4;
  size_t length = 8;
  // 0: ml_scratch03's own inputs, rank r's element i = (r+1)·10 + i mod 7,
  // so that the page starts where `lumen exercises run ml_scratch03` does.
  // Otherwise small integers drawn from the seed (sums stay exact).
  uint64_t seed = 0;
  collective::reduce_op op = collective::reduce_op::sum;
  double latency_ms = 0.05; // per message
  double mbytes_per_ms = 1; // each link's bandwidth (1 MB/ms = 1 GB/s)
};

/// Rank `rank`'s element `i` under `seed` (see ring_config::seed).
float ring_input(uint64_t seed, size_t rank, size_t i);

/// The ring after one step.
struct ring_frame {
  collective::ring_phase phase;
  size_t step = 0; // within the phase
  std::vector<collective::ring_step> ranks;
  std::vector<std::vector<float>> buffers;
  // holders[r][c]: the ranks whose input chunk c of rank r holds so far,
  // one bit a rank (the page colours chunks by it).
  std::vector<std::vector<uint64_t>> holders;
  std::vector<size_t> bytes_sent; // per rank, so far
  double time_ms = 0;             // virtual time at the end of the step
};

/// The ring against a naive all-reduce in which rank 0 gathers every
/// buffer, reduces, and sends the result back to each rank.
struct naive_figures {
  size_t root_bytes = 0;  // rank 0 sends (N-1)·S
  size_t other_bytes = 0; // every other rank sends S
  double time_ms = 0;     // rank 0's link carries it all, one way each
};

struct ring_run {
  ring_config config;
  std::vector<std::vector<float>> inputs;
  std::vector<ring_frame> frames; // 2(N-1) of them
  std::vector<float> expected;    // op over the inputs, element by element
  size_t bound_bytes = 0;         // 2·S·(N-1)/N, S the buffer's bytes
  naive_figures naive;
};

/// Runs the ring all-reduce of `cfg` step by step with
/// collective::simulate_allreduce. Throws `usage_error` for fewer than
/// two ranks, more than 64, or an empty buffer.
ring_run run_ring(const ring_config& cfg);

/// Where a recorded run (`--step=json` output of ml_scratch03, one JSON
/// object a line) first differs from the reference run of the same ranks
/// and length on ml_scratch03's inputs.
struct replay_verdict {
  bool matches = false;
  size_t steps = 0;     // lines read
  size_t first_bad = 0; // 1-based step of the first difference
  std::string what;     // the difference, or why the file is unusable
  ring_run reference;   // what it was compared with
  std::vector<ring_frame> recorded;
};

replay_verdict replay_ring(const std::string& jsonl);

/// Where a recorded run of any exercise (its `--step=json` output) first
/// differs from `reference`, the reference solution's run: the first
/// line, and in it the first field whose value differs (numbers by more
/// than `tolerance`, relative to the reference's, as a learner's build
/// may round otherwise).
replay_verdict compare_runs(const std::string& reference,
                            const std::string& recorded,
                            double tolerance = 1e-3);

// ---- ml_scratch01/02: a parameter server and its workers ---------------

struct ps_sim_config {
  ps_mode mode = ps_mode::async;
  size_t workers = 4;
  size_t backup = 0; // sync: steps close without the slowest `backup`
  float lr = 0.05f;
  bool staleness_lr = true; // async: lr divided by staleness
  float clip_norm = 0;
  codec compression = codec::none; // the workers' gradients on the wire
  double straggler = 1;            // worker 0 computes this many times slower
  double compute_ms = 10;
  double jitter = 0.3; // each compute time × (1 ± jitter), from the seed
  double network_ms = 1;
  size_t dim = 8;
  size_t samples = 512;
  size_t batch = 32;
  uint64_t seed = 1;
};

/// What a worker is doing.
enum class worker_state : uint8_t { computing, pushing, waiting };

const char* to_string(worker_state s) noexcept;

struct ps_worker_view {
  worker_state state = worker_state::computing;
  uint64_t version = 0; // of the weights it computes on
  uint64_t pushes = 0;  // gradients sent
  uint64_t dropped = 0; // refused by the server
  uint64_t last_staleness = 0;
  float grad_norm = 0;      // of its last gradient
  double busy_until_ms = 0; // when what it does now ends
};

/// A stretch of time a worker spent in one state, for a timeline.
struct ps_segment {
  size_t worker;
  worker_state state;
  double start_ms;
  double end_ms;
  uint64_t version; // of the weights the worker held
};

struct ps_point {
  double time_ms;
  uint64_t version;
  float loss;
};

/// The linear regression of ml_scratch01 trained by a server and its
/// workers, one event (a gradient pushed, weights sent back) at a time.
class ps_sim {
public:
  /// Throws `usage_error` for a configuration the server refuses.
  explicit ps_sim(const ps_sim_config& cfg);

  /// Runs the next event; false once nothing is left to run (never: the
  /// workers go on until the caller stops).
  bool step();

  /// Runs events until the server reaches `version` or `max_events` ran.
  void run_to(uint64_t version, size_t max_events = 1000000);

  const ps_sim_config& config() const noexcept {
    return cfg_;
  }
  const ps_core& server() const noexcept {
    return core_;
  }
  double now_ms() const noexcept {
    return clock_.now();
  }
  const std::vector<ps_worker_view>& workers() const noexcept {
    return views_;
  }
  /// The loss on the whole data set after each update of the weights.
  const std::vector<ps_point>& losses() const noexcept {
    return losses_;
  }
  /// The loss at the start, before any gradient.
  float initial_loss() const noexcept {
    return initial_loss_;
  }
  /// Distance from the server's weights to the true ones.
  float weight_error() const;
  /// The loss is not finite, or 100 times what it was at the start.
  bool diverged() const noexcept;
  /// The workers' last stretches of time, oldest first (at most
  /// `kept_segments`; the one under way is not in yet).
  const std::deque<ps_segment>& segments() const noexcept {
    return segments_;
  }
  static constexpr size_t kept_segments = 4096;
  /// What the last event was, in words (the page's log line).
  const std::string& last_event() const noexcept {
    return last_event_;
  }

private:
  void start_compute(size_t w, uint64_t version, std::vector<float> weights);
  void arrive(size_t w, uint64_t version, std::vector<float> grad);
  void answer(size_t w);
  void enter(size_t w, worker_state next, double until_ms);

  ps_sim_config cfg_;
  scheduler clock_;
  linear_problem problem_;
  linear_regression model_;
  ps_core core_;
  std::vector<ps_worker_view> views_;
  std::vector<std::vector<size_t>> shards_; // rows each worker samples
  std::vector<error_feedback> feedback_;    // a worker's compression
  std::vector<size_t> waiting_; // sync: workers whose push is in the step
  std::vector<ps_point> losses_;
  std::vector<double> since_; // when each worker entered its state
  std::deque<ps_segment> segments_;
  float initial_loss_ = 0;
  std::string last_event_;
};

// ---- ml_scratch04: data-parallel replicas, buckets during backward -----

struct ddp_sim_config {
  size_t workers = 4;
  size_t dim = 16; // an MLP on Gaussian blobs, one blob a class
  std::vector<size_t> hidden{64, 64, 32};
  size_t classes = 4;
  size_t samples = 2048;
  size_t batch = 32; // a worker's, each step
  float lr = 0.05f;
  size_t first_bucket_floats = 512; // DDP's small first bucket
  size_t bucket_cap_floats = 4096;
  bool overlap = true;          // off: all-reduces wait for the backward's end
  bool same_init = true;        // replicas start from rank 0's weights
  bool skip_a_bucket = false;   // the bug: the last bucket is never averaged
  size_t rebroadcast_every = 0; // rank 0's weights to all every K steps
  double straggler = 1;         // worker 0 computes this many times slower
  double mflops_per_ms = 2;     // each worker's compute
  double latency_ms = 0.02;     // per ring message
  double mbytes_per_ms = 1;     // each link's bandwidth
  uint64_t seed = 1;
};

/// A stretch of one worker's step: compute (lane 0: the forward pass, a
/// layer's backward) or communication (lane 1: a bucket's all-reduce).
struct ddp_span {
  size_t worker;
  int lane;
  std::string what; // "forward", "backward layer 2", "all-reduce bucket 0"
  long bucket;      // the bucket a backward layer or all-reduce is of, or -1
  double start_ms;
  double end_ms;
};

struct ddp_step_report {
  size_t step = 0; // 1-based
  double start_ms = 0;
  double end_ms = 0;
  double backward_end_ms = 0; // the slowest worker's
  // The same step with every all-reduce after the backward pass: what
  // overlapping saves.
  double serial_ms = 0;
  float loss = 0;  // the workers' mean batch loss
  float drift = 0; // the largest difference between two replicas
  bool rebroadcast = false;
  std::vector<ddp_span> spans;
};

/// N replicas of one MLP trained data-parallel on their shards: each step
/// every replica runs forward and backward on its batch, the gradients are
/// averaged bucket by bucket (train::plan_buckets, the ring's reductions)
/// as soon as a bucket's layers are done, and every replica applies the
/// average. Time is virtual: layers take their flops, all-reduces the
/// ring's 2(N-1) messages, one bucket at a time.
class ddp_sim {
public:
  /// Throws `usage_error` for a configuration that cannot run.
  explicit ddp_sim(const ddp_sim_config& cfg);

  /// Runs one step of every replica.
  const ddp_step_report& step();

  const ddp_sim_config& config() const noexcept {
    return cfg_;
  }
  const std::vector<train::bucket>& buckets() const noexcept {
    return plan_;
  }
  const std::vector<param_range>& layers() const noexcept {
    return layers_;
  }
  const std::vector<ddp_step_report>& history() const noexcept {
    return history_;
  }
  const std::vector<std::vector<float>>& replicas() const noexcept {
    return params_;
  }
  /// The largest difference between two replicas now.
  float drift() const;

private:
  ddp_sim_config cfg_;
  std::mt19937_64 rng_;
  dataset data_;
  mlp model_;
  std::vector<param_range> layers_;
  std::vector<train::bucket> plan_;
  std::vector<std::vector<size_t>> shards_;
  std::vector<std::vector<float>> params_;
  std::vector<optimizer> opts_;
  std::vector<ddp_step_report> history_;
  double now_ = 0;
};

} // namespace lumen::ml::sim
