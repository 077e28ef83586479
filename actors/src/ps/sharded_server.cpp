#include "lumen/ml/sharded_server.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#include <lumen/caf_interop.hpp>
#include <lumen/lumen.hpp>
#include <lumen/reply_landing.hpp>

namespace lumen::ml {

namespace {

/// `call()`, its answer landing at range `r` of `into` (none without one).
template <class Call>
auto landed_call(const std::shared_ptr<char>& into, collective::chunk r,
                 Call call) {
  if (!into)
    return call();
  // [reply-landing]
  // The answer's weights go straight into their range of `into`, the
  // buffer every shard's answer lands in side by side: read off the
  // socket there, or written there by a server on this host.
  lumen::reply_landing here{into.get() + r.begin * sizeof(float),
                            r.size() * sizeof(float), into};
  return call(); // lumen::call(server, push_atom::value, version, part)
  // [/reply-landing]
}

} // namespace

tensor join_shards(const std::vector<tensor>& parts, size_t numel,
                   std::shared_ptr<char> into) {
  size_t total = 0;
  for (auto& p : parts) {
    if (p.type() != dtype::float32)
      throw error("a shard answered with " + p.describe() +
                  " weights, not float32; the shards are not of this server");
    total += p.numel();
  }
  if (total != numel)
    throw error("the shards answered with " + std::to_string(total) +
                " weights for " + std::to_string(numel) +
                " parameters; the shards are not of this server");
  if (parts.size() == 1)
    return parts[0];
  if (!into)
    return tensor::cat(parts);
  size_t at = 0;
  for (auto& p : parts) {
    if (p.raw() != into.get() + at) // not landed: a local server's, say
      std::memcpy(into.get() + at, p.raw(), p.nbytes());
    at += p.nbytes();
  }
  auto data = into.get();
  return tensor::view({static_cast<int64_t>(numel)}, dtype::float32, data,
                      std::move(into));
}

sharded_server::sharded_server(const ps_config& cfg,
                               const std::vector<float>& initial,
                               const std::vector<std::string>& nodes)
  : numel_(initial.size()) {
  if (nodes.empty())
    throw usage_error("sharded_server: no nodes; give one node id a shard");
  if (nodes.size() > initial.size())
    throw usage_error("sharded_server: " + std::to_string(nodes.size()) +
                      " shards of " + std::to_string(initial.size()) +
                      " parameters; give each shard one at least");
  if (cfg.clip_norm > 0)
    throw usage_error("sharded_server: clip_norm spans every shard's "
                      "parameters, which no one shard sees; clip on the "
                      "workers (clip_by_global_norm before pushing), or use "
                      "one server");
  // Each worker is answered by every shard: one busy worker's link must
  // not hold up a shard's answers to the others.
  auto shard_cfg = cfg;
  shard_cfg.answers_at_once = nodes.size() > 1;
  for (size_t s = 0; s < nodes.size(); ++s) {
    auto r = shard_range(initial.size(), nodes.size(), s);
    servers_.push_back(spawn_parameter_server(
      shard_cfg,
      {initial.begin() + static_cast<std::ptrdiff_t>(r.begin),
       initial.begin() + static_cast<std::ptrdiff_t>(r.end)},
      nodes[s]));
  }
}

std::tuple<uint64_t, tensor> sharded_server::push(uint64_t version,
                                                  const tensor& grads) const {
  if (grads.type() != dtype::float32 || grads.numel() != numel_)
    throw usage_error("sharded_server::push: a gradient " + grads.describe() +
                      " for " + std::to_string(numel_) + " float32 parameters");
  std::vector<lumen::ObjectRef<std::tuple<uint64_t, tensor>>> refs;
  auto into = answers_buffer();
  // [at-once]
  // Every part on its way at once: no shard's busy link holds up the rest.
  lumen::sends_at_once at_once;
  for (size_t s = 0; s < servers_.size(); ++s) {
    auto r = shard_range(numel_, servers_.size(), s);
    refs.push_back(landed_call(into, r, [&] {
      // A view: the part is written to the wire from the caller's tensor,
      // which this call holds until every shard has answered.
      return lumen::call(servers_[s], push_atom::value, version,
                         grads.rows(r.begin, r.end));
    }));
  }
  // [/at-once]
  return answered(lumen::get(refs), into);
}

std::tuple<uint64_t, tensor> sharded_server::pull() const {
  std::vector<lumen::ObjectRef<std::tuple<uint64_t, tensor>>> refs;
  auto into = answers_buffer();
  for (size_t s = 0; s < servers_.size(); ++s)
    refs.push_back(
      landed_call(into, shard_range(numel_, servers_.size(), s),
                  [&] { return lumen::call(servers_[s], pull_atom::value); }));
  return answered(lumen::get(refs), into);
}

std::shared_ptr<char> sharded_server::answers_buffer() const {
  if (servers_.size() < 2)
    return nullptr; // one shard's answer is the weights as they came
  std::lock_guard<std::mutex> guard{spare_->mtx};
  auto& s = *spare_;
  // The weights last answered were let go (the fence orders their
  // readers' reads before the answers landing here). A push that failed
  // never marked its buffer answered: a shard may still write there.
  if (s.buffer && s.answered && s.lent.expired()) {
    std::atomic_thread_fence(std::memory_order_acquire);
    s.answered = false;
    return s.buffer;
  }
  s.answered = false;
  // [landing-buffer]
  // Memory a server on this host writes its answer into itself, through
  // shared memory; from the heap where there is none.
  s.buffer = lumen::landing_buffer(numel_ * sizeof(float));
  // [/landing-buffer]
  return s.buffer;
}

std::tuple<uint64_t, tensor>
sharded_server::answered(std::vector<std::tuple<uint64_t, tensor>> parts,
                         const std::shared_ptr<char>& into) const {
  uint64_t version = UINT64_MAX;
  std::vector<tensor> weights;
  for (auto& [v, w] : parts) {
    version = std::min(version, v);
    weights.push_back(std::move(w));
  }
  std::shared_ptr<char> lent;
  if (into) {
    // The caller's hold on `into`, apart from any other.
    lent = {std::make_shared<std::shared_ptr<char>>(into), into.get()};
    std::lock_guard<std::mutex> guard{spare_->mtx};
    if (spare_->buffer == into) {
      spare_->answered = true;
      spare_->lent = lent;
    }
  }
  return {version, join_shards(weights, numel_, std::move(lent))};
}

} // namespace lumen::ml
