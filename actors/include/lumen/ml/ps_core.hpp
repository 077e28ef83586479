#pragma once

// The rules of a parameter server, without the actor around it: the
// weights and their version, the optimizer, and what happens to each
// pushed gradient.
//   sync: a step closes once `workers − backup` gradients of the current
//     version are in; their mean is applied, the version goes up, and
//     every gradient of that step is answered with the new weights (the
//     actor holds their response promises until then). Gradients of an
//     older version (a backup step closed without them) are dropped and
//     counted.
//   async: each gradient is applied when it comes, its learning rate
//     divided by its staleness (current version − the gradient's; unless
//     `staleness_lr` is off), after
//     clipping; gradients staler than `max_staleness` are rejected and
//     counted; a histogram of staleness is kept.
// A gradient of the wrong size, with NaN or Inf values, or of a version
// from the future is rejected with its code, counted, and changes
// nothing.
//
// No CAF here: tests, exercises and the browser playground use it alike.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lumen/ml/codec.hpp"
#include "lumen/ml/optimizer.hpp"

namespace lumen::ml {

enum class ps_mode : uint8_t { sync, async };

/// "sync", "async".
const char* to_string(ps_mode m) noexcept;

struct ps_config {
  ps_mode mode = ps_mode::sync;
  size_t workers = 1; // gradients a sync step waits for, backups included
  size_t backup = 0;  // sync: a step closes without the last `backup`
  optimizer_config optimizer;
  float clip_norm = 0; // > 0: gradients are clipped to this global norm
  uint64_t max_staleness = UINT64_MAX; // async: older gradients are rejected
  // Async: the learning rate divided by the staleness. Off, every
  // gradient is applied at the full rate: only to see what that fixes.
  bool staleness_lr = true;
  // Sync: a step still open this long after its first gradient closes
  // with what it has, and the workers it lacked are not waited for until
  // they push again (a worker killed, hung, or behind a cut link). 0: 20
  // times the recent steps' median, 500 ms at least (10 s for the first
  // steps). A worker whose actor ends is not waited for at all.
  uint64_t step_timeout_ms = 0;
  // Sync: a step lasting this many times the recent steps' median closes
  // then with what it has, the workers it lacked given up on as above:
  // a deadline that bounds the tail of step times, which backup workers
  // alone cannot when stragglers overlap (ps_bench's tail figures). Above
  // 1; 0: none.
  double step_deadline = 0;
  // Sync: what the answer to a worker's push (push_update) carries. none:
  // the weights. fp16, int8: the change since the replica the workers
  // hold, compressed (a half or a quarter of the bytes); the server keeps
  // that replica as they do, so that one step's rounding is carried into
  // the next instead of adding up.
  codec broadcast = codec::none;
  // With a compressed broadcast: the full weights at every multiple of
  // this version, which brings every replica (one pulled at another version
  // too) back to the server's weights exactly. 0: never.
  uint64_t rebroadcast_every = 20;
  // Sync: a step's answers to workers on other hosts written all at once
  // (lumen::sends_at_once) instead of one after another. One after another
  // is faster when the server's own link is the bottleneck: a worker
  // answered early pushes its next gradient while the others' answers go
  // out. At once is faster when the workers' links are: shards on the
  // workers' hosts, each worker answered by every shard (sharded_server
  // sets it).
  bool answers_at_once = false;
};

/// A config as CAF messages carry it (to a node that spawns a server).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, optimizer_config& x) {
  return f(x.kind, x.lr, x.momentum, x.beta1, x.beta2, x.eps, x.weight_decay);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ps_config& x) {
  return f(x.mode, x.workers, x.backup, x.optimizer, x.clip_norm,
           x.max_staleness, x.staleness_lr, x.step_timeout_ms, x.step_deadline,
           x.broadcast, x.rebroadcast_every, x.answers_at_once);
}

/// Why a gradient was not taken.
enum class ps_refusal : uint8_t {
  none,
  wrong_size, // not num_params values
  not_finite, // NaN or Inf among them
  future,     // a version the server has not reached
  too_stale,  // async: older than max_staleness
  late,       // sync: its step closed without it (a backup step)
};

/// "none", "wrong_size", ...
const char* to_string(ps_refusal r) noexcept;

/// What a push did.
struct push_outcome {
  ps_refusal refused = ps_refusal::none;
  std::string why;          // for a refusal: the problem and the fix
  bool closed_step = false; // sync: this push closed the step
  uint64_t staleness = 0;   // async: how stale the gradient was
};

/// Counts for reports and tests.
struct ps_stats {
  uint64_t applied = 0; // gradients that went into the weights
  uint64_t steps = 0;   // updates of the weights
  std::map<ps_refusal, uint64_t> refused;
  std::map<uint64_t, uint64_t> staleness; // async: staleness -> gradients
  uint64_t timed_out = 0;    // sync: steps closed for waiting too long
  uint64_t workers_lost = 0; // sync: workers no longer waited for
};

class ps_core {
public:
  /// Throws `usage_error` for a config that cannot work (no workers, as
  /// many backups as workers, a bad optimizer).
  ps_core(ps_config cfg, std::vector<float> initial);

  /// Takes worker's gradient `g` (`n` values) computed at `version`.
  push_outcome push(uint64_t version, const float* g, size_t n);

  /// Refuses a gradient found bad before push saw it (one that does not
  /// decode), counting it with push's refusals.
  push_outcome reject(ps_refusal r, std::string why);

  const std::vector<float>& weights() const noexcept {
    return *weights_;
  }

  /// The weights as they are now, kept so while the pointer is held: the
  /// next update writes a copy instead (an answer is sent from them without
  /// one, and a holder's numbers never change under it).
  std::shared_ptr<const std::vector<float>> shared_weights() const noexcept {
    return weights_;
  }
  uint64_t version() const noexcept {
    return version_;
  }
  const ps_stats& stats() const noexcept {
    return stats_;
  }
  const ps_config& config() const noexcept {
    return cfg_;
  }
  optimizer& update_rule() noexcept {
    return opt_;
  }

  /// Sync: gradients of the open step so far.
  size_t pending() const noexcept {
    return pending_;
  }

  /// Sync: the gradients that close a step (workers − backup − lost, one
  /// at least).
  size_t quorum() const noexcept;

  /// Sync: closes the open step with the gradients it has (a step that
  /// waited too long). False if it has none.
  bool close_step();

  /// Sync: `n` workers are gone for good; later steps close without them.
  /// True if that closed the open step.
  bool lose_workers(size_t n);

  /// Sync: `n` workers given up on are back; steps wait for them again.
  void regain_workers(size_t n) noexcept;

  /// Sets the weights and version (a restored checkpoint's). Throws
  /// `usage_error` for weights of another size, or while a sync step is
  /// open (its gradients were computed on the weights being replaced).
  void restore(uint64_t version, std::vector<float> weights);

private:
  // Applies the open step's mean gradient: `mean`, or the sum's.
  bool finish_step(const float* mean = nullptr);
  // The weights to update: a copy first while shared_weights() are held.
  float* writable_weights();

  ps_config cfg_;
  std::shared_ptr<std::vector<float>> weights_;
  optimizer opt_;
  uint64_t version_ = 0;
  std::vector<float> sum_; // sync: the open step's gradients, summed
  size_t pending_ = 0;
  size_t lost_ = 0; // sync: workers gone
  std::vector<float> clipped_;
  ps_stats stats_;
};

/// Writes the server's weights, version and optimizer state (momentum's
/// velocity, Adam's moments and step count) to `path` as a safetensors
/// file: tensors "weights" and "optimizer.0", "optimizer.1", metadata
/// "version", "optimizer", "optimizer_steps". Throws `data_error` if it
/// cannot be written.
void save_checkpoint(ps_core& core, const std::string& path);

/// Restores what save_checkpoint wrote. Throws `data_error` for a file
/// that is damaged or not a server's checkpoint, and `usage_error` for
/// one that does not fit this server (another size or optimizer); the
/// server is unchanged then.
void restore_checkpoint(ps_core& core, const std::string& path);

} // namespace lumen::ml
