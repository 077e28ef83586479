#pragma once

// The serving and borrowing ends of refs that cross processes (see
// lumen/detail/object_exchange.hpp for the counting rule). Every cluster
// process has one: it holds what it sent away until the counts come back,
// answers fetches on its data server, and keeps one data connection per
// owner it borrowed from. Counts given back are batched: dropping 100,000
// borrowed refs sends a handful of frames, not 100,000.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "lumen/detail/object_exchange.hpp"
#include "lumen/object_store.hpp"

#include "security/credentials.hpp"
#include "transport/data_client.hpp"
#include "transport/data_plane.hpp"

namespace lumen::detail {

class object_exchange;

/// Throws `usage_error`: refs and handles reach other processes only in a
/// cluster.
[[noreturn]] void throw_no_cluster();

/// What this process holds of a ref borrowed from another: the wire it
/// came as. Gives its count back when destroyed.
class borrow {
public:
  borrow(ref_wire w, std::weak_ptr<object_exchange> exchange);
  ~borrow();

  borrow(const borrow&) = delete;
  borrow& operator=(const borrow&) = delete;

  const ref_wire wire;

private:
  std::weak_ptr<object_exchange> exchange_;
};

class object_exchange : public std::enable_shared_from_this<object_exchange> {
public:
  explicit object_exchange(credentials creds);
  ~object_exchange();

  /// This process's data server listens at `address`: refs it sends name
  /// it as their owner or holder.
  void serve_at(std::string address);

  /// Ends the batching thread and closes the connections to owners;
  /// fetches still waiting fail.
  void stop();

  /// Makes this the exchange the codec uses (null: none).
  static void install(std::shared_ptr<object_exchange> exchange);
  static std::shared_ptr<object_exchange> installed();

  ref_wire export_object(const std::shared_ptr<object_state>& st, uint64_t type,
                         value_encoder encoder);
  imported_object import_object(const ref_wire& wire);
  void fetch(const borrow& lease,
             std::function<void(std::exception_ptr, const bytes&)> done);

  /// Holds `keep` (an actor handle's share) for one process that receives
  /// the returned hold; as with objects, it comes back with `give_back`.
  ref_wire hold(std::shared_ptr<void> keep);

  /// Gives one count of `hold` back to `holder`.
  void give_back(const std::string& holder, uint64_t hold);

  /// This process's data address, or "" before it serves.
  std::string address();

  /// A live connection to the process at `address`; throws `error` if
  /// none can be made.
  std::shared_ptr<data_client> connection(const std::string& address);

  /// Serves an `object` frame of the data plane.
  void serve(const std::shared_ptr<data_connection>& c, uint64_t id,
             const bytes& payload);

  ref_stats stats();

private:
  /// An object of this process that others hold refs to.
  struct exported {
    std::shared_ptr<object_state> st;
    value_encoder encoder = nullptr;
    uint64_t type = 0;
    uint64_t holds = 0;
  };

  /// One ref or handle sent out: each has a hold of its own, so that a
  /// count given back twice (a constructor's arguments decoded again for a
  /// restart) frees nothing another receiver holds.
  struct hold_entry {
    uint64_t object = 0;        // in exports_, or 0
    std::shared_ptr<void> keep; // for a handle
  };

  /// Ends hold `id`: what it kept alive goes into `doomed`, for the caller
  /// to release outside the lock. Under mtx_.
  void end_hold(uint64_t id, std::vector<std::shared_ptr<void>>& doomed);

  void serve_fetch(const std::shared_ptr<data_connection>& c, uint64_t id,
                   uint64_t object, uint64_t type);
  void run_batches();
  void flush(std::unordered_map<std::string, bytes> batches);

  const credentials creds_;
  std::mutex mtx_;
  std::string self_;                               // under mtx_
  std::unordered_map<uint64_t, exported> exports_; // by object id
  std::unordered_map<uint64_t, hold_entry> holds_;
  size_t kept_ = 0; // holds of handles
  std::unordered_map<std::string, std::shared_ptr<data_client>> owners_;
  // Counts to give back, encoded per holder, and the thread that sends them.
  std::unordered_map<std::string, bytes> returns_;
  size_t returns_queued_ = 0;
  bool closing_ = false;  // the batcher sends what is queued, then ends
  bool stopping_ = false; // nothing more is sent or held
  std::condition_variable returns_cv_;
  std::thread batcher_;
  uint64_t next_hold_ = 1;
  std::atomic<uint64_t> borrowed_{0};
  std::atomic<uint64_t> served_{0};
  std::atomic<uint64_t> fetched_{0};

  friend class borrow;
};

} // namespace lumen::detail
