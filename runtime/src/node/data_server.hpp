#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/actor_host.hpp"
#include "core/process_services.hpp"
#include "core/thread_set.hpp"
#include "security/credentials.hpp"
#include "security/gate.hpp"
#include "transport/data_plane.hpp"

namespace lumen::detail {

class object_exchange;

/// Answers request `id` on `c` with `err`.
void reply_error(const std::shared_ptr<data_connection>& c, uint64_t id,
                 std::exception_ptr err);

/// The tasks and calls one connection's peer started, by request id, for
/// its cancel frames; only the connection's reader thread uses it.
class started_work {
public:
  /// Records `w` (ignored if null) under `id`.
  void add(uint64_t id, std::shared_ptr<cancellable> w);

  /// The work of request `id` if it still runs or waits, else null.
  std::shared_ptr<cancellable> find(uint64_t id) const;

private:
  std::unordered_map<uint64_t, std::weak_ptr<cancellable>> by_id_;
  size_t live_after_prune_ = 32;
};

/// The serving side, in every head and node: serves the connections its
/// gate admits, one reader thread each, running tasks on the pool and
/// handing calls to actor hosts.
class data_server {
public:
  /// Listens on `host`, any free port, serving the values `objects`
  /// holds too; throws `error` if it cannot.
  data_server(process_services& rt, const std::string& host,
              const credentials& creds, object_exchange& objects);
  ~data_server();

  uint16_t port() const noexcept;

  /// Makes an actor hosted here callable under `id`.
  void expose(uint64_t id, std::weak_ptr<actor_core> core);

  /// For an exposed actor that ended: what calls still coming for it are
  /// told ("actor of class C died: why").
  void bury(uint64_t id, std::string obituary);

private:
  void admit(gated_socket link);
  void serve(std::shared_ptr<data_connection> c);
  /// These two return the work they started, for a cancel frame; null
  /// if they answered at once.
  std::shared_ptr<cancellable>
  run_task(const std::shared_ptr<data_connection>& c, uint64_t id,
           std::shared_ptr<bytes> payload);
  std::shared_ptr<cancellable>
  run_call(const std::shared_ptr<data_connection>& c, uint64_t id,
           std::shared_ptr<bytes> payload);
  void kill(const std::shared_ptr<data_connection>& c, uint64_t id,
            const bytes& payload);
  void cancel(const std::shared_ptr<data_connection>& c, uint64_t id,
              const bytes& payload, started_work& work);
  /// The actor exposed as `id`; null and why if it is gone.
  std::shared_ptr<actor_core> exposed(uint64_t id, std::string& gone);

  process_services& rt_;
  object_exchange& objects_;
  std::unique_ptr<gate> gate_;
  std::mutex mtx_;
  std::vector<std::shared_ptr<data_connection>> conns_;
  thread_set readers_; // one per connection, joined once it ended
  struct exposed_actor {
    std::weak_ptr<actor_core> core;
    std::string obituary;
  };
  std::unordered_map<uint64_t, exposed_actor> actors_;
};

} // namespace lumen::detail
