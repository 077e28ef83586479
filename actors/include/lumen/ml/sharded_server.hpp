#pragma once

// Parameter servers partitioned by key range (the seed: "partition
// parameter servers"): M servers, each owning a contiguous range of the
// parameters, on nodes of their own, so that pushes and pulls spread
// their bytes and their work over M processes. The client splits a push
// into its ranges, sends every part at once and joins the answers; a
// sharded server's results equal one server's.
//
//   lumen::ml::sharded_server ps{cfg, model.init(0), {"node-1", "node-2"}};
//   auto [version, weights] = ps.push(version, grads);
//   // workers: lumen::call(worker, train_atom::value, ps.servers(), until)

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "lumen/collective/ring.hpp"
#include "lumen/ml/compress.hpp"
#include "lumen/ml/parameter_server.hpp"
#include "lumen/ml/tensor.hpp"
#include "lumen/ml/wire.hpp"

namespace lumen::ml {

/// The range of `numel` parameters shard `shard` of `shards` owns: sizes
/// differ by one at most, in order.
inline collective::chunk shard_range(size_t numel, size_t shards,
                                     size_t shard) noexcept {
  return collective::chunk_of(numel, shards, shard);
}

/// The shards' weights, in shard order, as one tensor of `numel` floats
/// (a single shard's as it came). With `into`, a buffer of `numel` floats,
/// the tensor views it, and parts that lie in their places there already
/// (answers landed there: lumen::reply_landing) are not copied. Throws
/// `error` for a part that is not float32 or parts that do not add up to
/// `numel`: shards of another server.
tensor join_shards(const std::vector<tensor>& parts, size_t numel,
                   std::shared_ptr<char> into = nullptr);

class sharded_server {
public:
  sharded_server() = default;

  /// Spawns one server per entry of `nodes` (a node may come twice), shard
  /// i over initial's range i. Throws `usage_error` for no nodes, more
  /// shards than parameters, or a config one server would refuse, and
  /// for clip_norm > 0: the global norm spans every shard, so clip on the
  /// workers instead (clip_by_global_norm before pushing).
  sharded_server(const ps_config& cfg, const std::vector<float>& initial,
                 const std::vector<std::string>& nodes);

  size_t num_params() const noexcept {
    return numel_;
  }

  /// The servers, shard by shard: what a worker's train takes.
  const std::vector<parameter_server>& servers() const noexcept {
    return servers_;
  }

  /// Pushes `grads` computed at `version`: every shard its range, at
  /// once. Returns the lowest version the shards answered with and the
  /// joined weights. Throws `typed_actor_error` with the first refusal.
  std::tuple<uint64_t, tensor> push(uint64_t version,
                                    const tensor& grads) const;

  /// The lowest of the shards' versions, and the joined weights.
  std::tuple<uint64_t, tensor> pull() const;

private:
  /// A buffer for the shards' answers to land in, one after another: the
  /// last one's once no one holds its weights, else a new one.
  std::shared_ptr<char> answers_buffer() const;

  /// The shards' answers, every one in, as the caller's weights: `into`
  /// is used again once the caller lets them go.
  std::tuple<uint64_t, tensor>
  answered(std::vector<std::tuple<uint64_t, tensor>> parts,
           const std::shared_ptr<char>& into) const;

  /// The buffer the last answers landed in, shared by copies.
  struct spare_buffer {
    std::mutex mtx;
    std::shared_ptr<char> buffer;
    // Set once every answer landed in `buffer` and the weights went out
    // as `lent`. Not the buffer's own count of holders: the runtime lets
    // go of the answers' parts a moment after the caller has them.
    bool answered = false;
    std::weak_ptr<char> lent;
  };

  size_t numel_ = 0;
  std::vector<parameter_server> servers_;
  std::shared_ptr<spare_buffer> spare_ = std::make_shared<spare_buffer>();
};

} // namespace lumen::ml
