#include "lumen/ml/batch_stream.hpp"

#include <algorithm>
#include <chrono>

#include <lumen/time.hpp>

namespace lumen::ml {

batch_stream::batch_stream(dataset data, size_t batch_size, uint64_t seed,
                           bool prefetch)
  : data_(std::move(data))
  , batch_size_(batch_size)
  , seed_(seed) {
  if (data_.size() == 0)
    throw usage_error("batch_stream: the data set is empty; give each worker "
                      "at least one row (fewer workers, or more data)");
  if (batch_size_ == 0 || batch_size_ > data_.size())
    batch_size_ = data_.size();
  per_epoch_ = (data_.size() + batch_size_ - 1) / batch_size_;
  auto bytes = batch_size_ * (data_.features.nbytes() / data_.size());
  depth_ = bytes <= (size_t{1} << 20) ? 8 : 2;
  if (prefetch)
    loader_ = std::thread{[this] { load(); }};
}

batch_stream::~batch_stream() {
  if (!loader_.joinable())
    return;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
  }
  cv_.notify_all();
  loader_.join();
}

batch_stream::batch batch_stream::make(uint64_t index) {
  batch b;
  b.epoch = index / per_epoch_;
  if (b.epoch != order_epoch_) {
    // Each epoch its own order, the same for a seed on every machine.
    order_ = shuffled_rows(data_.size(), seed_ + b.epoch);
    order_epoch_ = b.epoch;
  }
  auto begin = (index % per_epoch_) * batch_size_;
  auto end = std::min(order_.size(), begin + batch_size_);
  b.rows.assign(order_.begin() + static_cast<std::ptrdiff_t>(begin),
                order_.begin() + static_cast<std::ptrdiff_t>(end));
  b.data = data_.take(b.rows);
  return b;
}

void batch_stream::load() {
  for (uint64_t index = 0;; ++index) {
    std::unique_ptr<batch> b;
    try {
      b = std::make_unique<batch>(make(index));
    } catch (...) {
      std::lock_guard<std::mutex> guard{mtx_};
      failed_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    std::unique_lock<std::mutex> guard{mtx_};
    if (ready_.size() >= depth_) {
      loader_waits_ = true;
      cv_.wait(guard, [this] { return stopping_ || ready_.size() < depth_; });
      loader_waits_ = false;
    }
    if (stopping_)
      return;
    ready_.push_back(std::move(b));
    if (caller_waits_)
      cv_.notify_all();
  }
}

batch_stream::batch batch_stream::next() {
  // Virtual in a simulated run, where loading costs no time.
  auto start = lumen::now();
  batch b;
  if (loader_.joinable()) {
    std::unique_lock<std::mutex> guard{mtx_};
    if (ready_.empty()) {
      caller_waits_ = true;
      cv_.wait(guard, [this] { return !ready_.empty() || failed_; });
      caller_waits_ = false;
    }
    if (ready_.empty())
      std::rethrow_exception(failed_);
    b = std::move(*ready_.front());
    ready_.pop_front();
    // The loader refills in bursts: a wake-up costs a system call (tens
    // of microseconds on some hosts), too much to pay each batch.
    if (loader_waits_ && ready_.size() <= depth_ / 2)
      cv_.notify_all();
  } else {
    b = make(made_);
  }
  ++made_;
  waited_ += std::chrono::duration<double>(lumen::now() - start).count();
  return b;
}

} // namespace lumen::ml
