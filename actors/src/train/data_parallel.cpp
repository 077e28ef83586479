#include "lumen/train/data_parallel.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include <lumen/object_store.hpp>
#include <lumen/trace.hpp>

#include "lumen/collective/collective.hpp"

namespace lumen::train {

namespace {

using clock = std::chrono::steady_clock;

double since(clock::time_point start) {
  return std::chrono::duration<double>(clock::now() - start).count();
}

} // namespace

bucketed_allreduce::bucketed_allreduce(const ml::model& net, std::string group,
                                       bucket_config cfg)
  : net_(net)
  , group_(std::move(group))
  , overlap_(cfg.overlap)
  , buckets_(plan_buckets(net.layers(), cfg))
  , alone_(collective::get_world_size(group_) == 1) {
  if (!alone_)
    for (auto& own : own_grad_)
      own = collective::allreduce_buffer{net.num_params(), group_};
  bucket_of_.resize(net.layers().size());
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (auto l = buckets_[b].first_layer; l <= buckets_[b].last_layer; ++l)
      bucket_of_[l] = b;
}

float bucketed_allreduce::loss_and_mean_gradient(const float* params,
                                                 const ml::dataset& batch,
                                                 float* grad) {
  auto start = clock::now();
  auto n = buckets_.size();
  timeline_.started.assign(n, 0);
  timeline_.finished.assign(n, 0);
  if (alone_) { // the mean of one member's gradient is that gradient
    trace::span pass{"forward+backward", "train"};
    auto loss = net_.loss_and_gradient(params, batch, grad);
    timeline_.backward_end = timeline_.end = since(start);
    std::fill(timeline_.finished.begin(), timeline_.finished.end(),
              timeline_.end);
    return loss;
  }
  layers_left_.resize(n);
  for (size_t b = 0; b < n; ++b)
    layers_left_[b] = buckets_[b].last_layer - buckets_[b].first_layer + 1;
  running_.assign(n, collective::started_allreduce{});
  auto& own = own_grad_[steps_++ % 2];
  // A trace shows each bucket's all-reduce on a track of its own, against
  // the backward pass on this thread's row.
  std::vector<trace::async_span> in_flight(trace::enabled() ? n : 0);
  size_t begun = 0, over = 0; // buckets started, and finished, in order
  auto begin = [&](size_t b) {
    auto r = buckets_[b].params;
    if (!in_flight.empty())
      in_flight[b] = std::move(
        trace::async_span{"bucket allreduce", "train"}
          .arg("bucket", static_cast<int64_t>(b))
          .arg("bytes", static_cast<int64_t>(r.size() * sizeof(float))));
    timeline_.started[b] = since(start);
    // The bucket's part of this member's gradient, where the pass wrote
    // it, to the mean's.
    running_[b] = collective::allreduce_start(own.data() + r.begin,
                                              grad + r.begin, r.size(), group_,
                                              collective::reduce_op::average);
    ++begun;
  };
  // Moves the started all-reduces on between layers, noting when each
  // one ended.
  auto finished = [&](size_t b) {
    timeline_.finished[b] = since(start);
    if (!in_flight.empty())
      in_flight[b].end();
  };
  auto drive = [&] {
    while (over < begun && running_[over].test())
      finished(over++);
  };
  auto on_layer = [&](size_t layer) {
    auto b = bucket_of_[layer];
    if (--layers_left_[b] == 0 && overlap_)
      begin(b);
    drive();
  };
  float loss;
  {
    trace::span pass{"forward+backward", "train"};
    // [staged]
    // The others may still read the gradient of two steps ago.
    own.reuse();
    loss = net_.loss_and_gradient(params, batch, own.data(), on_layer);
    // [/staged]
  }
  timeline_.backward_end = since(start);
  if (!overlap_)
    for (size_t b = 0; b < n; ++b) // in the order backward finishes them
      begin(b);
  for (; over < n; ++over) {
    running_[over].wait();
    finished(over);
  }
  timeline_.end = since(start);
  return loss;
}

void rebroadcast(std::vector<float>& params, const std::string& group,
                 int root) {
  collective::broadcast(params, root, group);
}

float drift(const std::vector<float>& params, const std::string& group) {
  auto top = params, bottom = params;
  collective::allreduce(top, group, collective::reduce_op::max);
  collective::allreduce(bottom, group, collective::reduce_op::min);
  float d = 0;
  for (size_t i = 0; i < params.size(); ++i)
    d = std::max(d, top[i] - bottom[i]);
  return d;
}

} // namespace lumen::train
