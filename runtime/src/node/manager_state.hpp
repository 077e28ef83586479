#pragma once

// The node manager's state, shared by its two parts: node_manager.cpp (what
// every node does) and head_handlers.cpp (what only the head answers).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include <caf/actor.hpp>
#include <caf/message_handler.hpp>
#include <caf/stateful_actor.hpp>

#include "lumen/detail/runtime.hpp"

#include "head/head_directory.hpp"
#include "head/kv_store.hpp"
#include "node/node_manager.hpp"

namespace lumen::detail {

class actor_ref;

struct manager_state {
  process_services* rt = nullptr;
  data_server* data = nullptr;
  node_settings settings;
  std::string id;
  // The cluster's nodes and names (head only).
  head_directory directory;
  // The cluster's key-value store, lumen/kv.hpp (head only).
  kv_store kv;
  // This head's epoch (head), or that of the head this node joined.
  uint64_t epoch = 0;
  // Actors hosted here for other processes, kept alive until they end.
  std::unordered_map<caf::actor_addr, std::shared_ptr<actor_ref>> hosted;
  // The head (nodes only), told about names and actor counts.
  caf::actor head;
  // What this node last told the head it offers and its work holds of
  // it; nothing before it told this head anything.
  std::optional<std::pair<resource_request, resource_request>> reported;
};

using manager_actor = caf::stateful_actor<manager_state>;

/// Registers `name` in the head's directory; false if it is taken.
bool bind_name(manager_actor* self, const std::string& name, named_entry entry);

/// The head's part: its directory's names and channel endpoints, the
/// key-value store, and nodes' reports of their actors and resources.
caf::message_handler head_handlers(manager_actor* self);

} // namespace lumen::detail
