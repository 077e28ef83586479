// A process's typed actors across the cluster: requests to another
// process on the data plane, spawns through the node's manager.

#include <caf/all.hpp>

#include "core/process_runtime.hpp"
#include "transport/protocol.hpp"
#include "transport/typed_requests.hpp"

namespace lumen::detail {

std::string process_runtime::node_of(const caf::actor_addr& who) {
  return node_name_of(who ? who.node() : caf::node_id{});
}

caf::expected<caf::strong_actor_ptr>
process_runtime::spawn_typed(const std::string& node_id,
                             const std::string& name, caf::message args,
                             const std::set<std::string>& interface) {
  if (node_id == this_node() || node_id == "local") {
    auto h =
      sys_->spawn<caf::actor>(name, std::move(args), nullptr, true, &interface);
    if (!h)
      return h.error();
    return caf::actor_cast<caf::strong_actor_ptr>(*h);
  }
  caf::expected<caf::strong_actor_ptr> out{caf::sec::none};
  caf::scoped_actor self{*sys_};
  self
    ->request(manager_of(node_id), std::chrono::seconds(10),
              spawn_typed_atom::value, name, std::move(args), interface)
    .receive([&](caf::strong_actor_ptr& h) { out = std::move(h); },
             [&](caf::error& err) { out = std::move(err); });
  return out;
}

bool process_runtime::send_typed(const caf::strong_actor_ptr& target,
                                 uint64_t sender, const caf::message& msg,
                                 bool carries_handles, typed_done done) {
  if (carries_handles || !target || target->home_system != sys_.get() ||
      target->node() == sys_->node())
    return false;
  auto route = typed_route(target->node());
  return route && detail::send_typed(*route, *sys_, target, sender, msg,
                                     std::move(done));
}

} // namespace lumen::detail
