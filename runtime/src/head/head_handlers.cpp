// The head's part of the node manager (node_manager.cpp has the rest):
// names, channel endpoints, the key-value store, and what nodes report.
#include <caf/all.hpp>

#include "lumen/errors.hpp"

#include "core/log.hpp"
#include "node/manager_state.hpp"
#include "transport/protocol.hpp"

namespace lumen::detail {

/// Registers `name` in the head's directory; false if it is taken.
bool bind_name(manager_actor* self, const std::string& name,
               named_entry entry) {
  auto handle = entry.handle;
  if (!self->state.directory.bind(name, std::move(entry)))
    return false;
  self->monitor(handle); // its death frees the name
  return true;
}

caf::message_handler head_handlers(manager_actor* self) {
  return {
    [=](name_atom, const std::string& name, const std::string& cls,
        const std::string& node,
        const caf::actor& handle) -> caf::result<bool> {
      return bind_name(self, name, {cls, node, handle});
    },
    [=](lookup_atom, const std::string& name)
      -> caf::result<bool, std::string, std::string, caf::actor> {
      auto found = self->state.directory.lookup(name);
      if (!found)
        return {false, std::string{}, std::string{}, caf::actor{}};
      return {true, found->cls, found->node, found->handle};
    },
    [=](process_node_atom,
        const caf::node_id& process) -> caf::result<bool, std::string> {
      auto node = process == self->node()
                    ? std::string{"head"}
                    : self->state.directory.node_of_process(process);
      return {!node.empty(), node};
    },
    [=](endpoint_atom, const std::string& name, const std::string& address,
        const caf::actor& owner) {
      if (!self->state.directory.bind_endpoint(name,
                                               {address, owner.address()}))
        return false;
      self->monitor(owner); // its death frees the name
      return true;
    },
    [=](find_endpoint_atom,
        const std::string& name) -> caf::result<bool, std::string> {
      auto found = self->state.directory.find_endpoint(name);
      return {found.has_value(), found.value_or(std::string{})};
    },
    [=](drop_endpoint_atom, const std::string& name, const caf::actor& owner) {
      self->state.directory.drop_endpoint(name, owner.address());
    },
    [=](kv_put_atom, const std::string& key, std::string& value,
        bool overwrite) -> caf::result<bool, std::string> {
      auto result = self->state.kv.put(key, std::move(value), overwrite);
      return {result.stored, std::move(result.refusal)};
    },
    [=](kv_get_atom, const std::string& key) -> caf::result<bool, std::string> {
      auto found = self->state.kv.get(key);
      return {found.has_value(), found.value_or(std::string{})};
    },
    [=](kv_erase_atom, const std::string& key) {
      return self->state.kv.erase(key);
    },
    [=](kv_keys_atom,
        const std::string& prefix) -> caf::result<bool, std::string> {
      return {true, pack_keys(self->state.kv.keys(prefix))};
    },
    [=](actors_atom, int32_t count) {
      auto sender = self->current_sender();
      if (!sender)
        return;
      self->state.directory.count_actors(sender->address(), count);
    },
    [=](used_atom, const bytes& used) {
      auto sender = self->current_sender();
      if (!sender)
        return;
      try {
        auto [total, amounts] =
          decode<resource_request, resource_request>(used);
        check_resources(total, "a node's report");
        check_resources(amounts, "a node's report");
        self->state.directory.set_load(sender->address(), std::move(total),
                                       std::move(amounts));
      } catch (const std::exception& e) {
        log_line(std::string{"ignored a bad report of used resources: "} +
                 e.what());
      }
    },
  };
}

} // namespace lumen::detail
