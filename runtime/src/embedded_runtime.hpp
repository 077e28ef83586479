#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>

#include "lumen/detail/runtime.hpp"
#include "lumen/init.hpp"

#include "actor_host.hpp"
#include "task_pool.hpp"

namespace lumen::detail {

/// A whole cluster in one process: one CAF actor system whose detached
/// actors host Lumen actors, a task pool, and the name directory.
class embedded_runtime final : public runtime {
public:
  explicit embedded_runtime(const init_options& opts);

  /// Kills every actor, stops the task pool and waits for CAF to finish.
  ~embedded_runtime() override;

  void submit_task(std::shared_ptr<task_spec> t) override;
  std::shared_ptr<actor_ref> spawn_actor(const actor_class_entry& cls,
                                         std::unique_ptr<actor_factory> f,
                                         const actor_options& opts) override;
  void submit_call(const actor_ref& a, std::shared_ptr<actor_call> c) override;
  std::shared_ptr<actor_ref> find_actor(const std::string& name) override;
  void kill_actor(const actor_ref& a) override;

  caf::actor_system& system() {
    return *sys_;
  }

  /// Runs `job` on an event-based actor, where it may issue CAF requests.
  void run_as_requester(std::function<void(caf::event_based_actor*)> job);

  /// Ends `h` at shutdown, so that the actor system can finish.
  void adopt(caf::actor h);

private:
  void forget_name(const actor_core& core);

  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  caf::actor requester_;
  task_pool pool_;
  std::mutex mtx_;
  std::unordered_map<std::string, std::shared_ptr<actor_ref>> names_;
  std::vector<std::weak_ptr<actor_core>> actors_;
  std::vector<caf::actor> adopted_;
};

/// The process's runtime as the embedded one (the only kind so far).
embedded_runtime& embedded();

} // namespace lumen::detail
