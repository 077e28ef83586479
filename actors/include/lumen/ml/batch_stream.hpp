#pragma once

// A data set's batches for a training loop, an epoch after another, made
// ahead of time on a thread of the stream's own (the seed's "batch
// pre-fetching").
//
//   lumen::ml::batch_stream batches{shard, 64, seed, true};
//   auto b = batches.next(); // b.data, b.rows, b.epoch
//
// No CAF here: tests, exercises and the browser playground use it alike.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lumen/ml/data.hpp"

namespace lumen::ml {

/// A data set's batches, an epoch after another: each epoch visits every
/// row once, in an order drawn from `seed` and the epoch's number, the
/// last batch holding what is left. With `prefetch`, a thread of the
/// stream's own prepares the next batches while the caller works on
/// this one, and next() rarely waits.
class batch_stream {
public:
  struct batch {
    dataset data;
    std::vector<size_t> rows; // indices into the stream's data set
    uint64_t epoch = 0;
  };

  /// `batch_size` 0 takes the whole set each time. Throws `usage_error`
  /// for an empty data set.
  batch_stream(dataset data, size_t batch_size, uint64_t seed, bool prefetch);
  ~batch_stream();

  batch_stream(const batch_stream&) = delete;
  batch_stream& operator=(const batch_stream&) = delete;

  /// The next batch, once it is ready.
  batch next();

  /// Time next() spent waiting for batches (making them, without
  /// prefetch), in seconds.
  double waited_seconds() const noexcept {
    return waited_;
  }

  size_t batches_per_epoch() const noexcept {
    return per_epoch_;
  }

private:
  batch make(uint64_t index);
  void load();

  dataset data_;
  size_t batch_size_;
  uint64_t seed_;
  size_t per_epoch_;
  uint64_t order_epoch_ = UINT64_MAX;
  std::vector<size_t> order_; // this epoch's rows
  uint64_t made_ = 0;         // batches made so far
  double waited_ = 0;
  // The loader thread, with prefetch: a few batches ahead (8 of up to a
  // MiB, else 2), so that a moment without a core for it does not make
  // the caller wait.
  size_t depth_ = 2;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<batch>> ready_;
  std::exception_ptr failed_;
  bool stopping_ = false;
  // Who sleeps on cv_: a wake-up costs a system call, made only for them.
  bool loader_waits_ = false;
  bool caller_waits_ = false;
  std::thread loader_;
};

} // namespace lumen::ml
