#include "head/head_directory.hpp"

#include <algorithm>
#include <random>

#include "core/log.hpp"

namespace lumen::detail {

namespace {

/// The number in "node-N", or 0.
int node_number(const std::string& id) {
  if (id.rfind("node-", 0) != 0)
    return 0;
  try {
    return std::stoi(id.substr(5));
  } catch (const std::exception&) {
    return 0;
  }
}

} // namespace

head_directory::head_directory()
  : epoch_(std::random_device{}() | uint64_t{std::random_device{}()} << 32) {}

bool head_directory::id_taken(const std::string& id) const {
  return std::any_of(nodes_.begin(), nodes_.end(),
                     [&](const node_info& n) { return n.id == id; });
}

std::pair<std::string, bool>
head_directory::admit(const std::string& host, uint16_t port,
                      uint16_t data_port,
                      const std::map<std::string, std::string>& resources,
                      const std::string& previous_id, uint64_t previous_epoch,
                      const caf::actor_addr& manager) {
  if (previous_epoch == epoch_)
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].id == previous_id && nodes_[i].alive &&
          managers_[i] == manager)
        return {previous_id, false}; // still alive: nothing changes
  next_node_ = std::max(next_node_, node_number(previous_id) + 1);
  std::string id;
  if (!previous_id.empty() && previous_epoch != epoch_ &&
      !id_taken(previous_id)) {
    id = previous_id;
  } else {
    do
      id = "node-" + std::to_string(next_node_++);
    while (id_taken(id));
  }
  auto address = host + ":" + std::to_string(port);
  node_info info{id, address, true, {}, host + ":" + std::to_string(data_port),
                 0,  {}};
  for (auto& [k, v] : resources) {
    try {
      info.resources[k] = std::stod(v);
    } catch (const std::exception&) {
      log_line("node " + id + " sent a bad resource amount: " + k + "=" + v);
    }
  }
  nodes_.push_back(std::move(info));
  managers_.push_back(manager);
  if (previous_id.empty())
    log_lifecycle("node " + id + " joined from " + address);
  else if (previous_epoch == epoch_)
    log_line("node " + previous_id + " at " + address +
             ", given up for dead before, rejoined as " + id);
  else
    log_line("node " + previous_id + " of an earlier head rejoined from " +
             address + " as " + id);
  return {id, true};
}

std::string head_directory::next_driver() {
  return "driver-" + std::to_string(next_driver_++);
}

bool head_directory::alive(const std::string& id) const {
  for (auto& n : nodes_)
    if (n.id == id)
      return n.alive;
  return false;
}

std::string head_directory::node_of_process(const caf::node_id& process) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].alive && managers_[i].node() == process)
      return nodes_[i].id;
  return {};
}

node_info* head_directory::by_manager(const caf::actor_addr& manager) {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (managers_[i] == manager)
      return &nodes_[i];
  return nullptr;
}

void head_directory::count_actors(const caf::actor_addr& manager, int count) {
  if (auto* n = by_manager(manager))
    n->actors = count;
}

void head_directory::set_load(const caf::actor_addr& manager,
                              std::map<std::string, double> total,
                              std::map<std::string, double> used) {
  if (auto* n = by_manager(manager)) {
    n->resources = std::move(total);
    n->used = std::move(used);
  }
}

bool head_directory::bind(const std::string& name, named_entry entry) {
  if (auto i = names_.find(name); i != names_.end()) {
    bool on_dead_node =
      std::any_of(nodes_.begin(), nodes_.end(), [&](const node_info& n) {
        return n.id == i->second.node && !n.alive;
      });
    if (!on_dead_node)
      return false;
    names_.erase(i);
  }
  names_.emplace(name, std::move(entry));
  return true;
}

std::optional<named_entry>
head_directory::lookup(const std::string& name) const {
  auto i = names_.find(name);
  if (i == names_.end())
    return std::nullopt;
  return i->second;
}

bool head_directory::bind_endpoint(const std::string& name,
                                   endpoint_entry entry) {
  return endpoints_.emplace(name, std::move(entry)).second;
}

std::optional<std::string>
head_directory::find_endpoint(const std::string& name) const {
  auto i = endpoints_.find(name);
  if (i == endpoints_.end())
    return std::nullopt;
  return i->second.address;
}

void head_directory::drop_endpoint(const std::string& name,
                                   const caf::actor_addr& owner) {
  auto i = endpoints_.find(name);
  if (i != endpoints_.end() && i->second.owner == owner)
    endpoints_.erase(i);
}

void head_directory::on_down(const caf::actor_addr& source,
                             const std::string& reason) {
  for (auto i = endpoints_.begin(); i != endpoints_.end();)
    i = i->second.owner == source ? endpoints_.erase(i) : std::next(i);
  for (auto i = names_.begin(); i != names_.end();)
    i = i->second.handle.address() == source ? names_.erase(i) : std::next(i);
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (managers_[i] == source && nodes_[i].alive) {
      nodes_[i].alive = false;
      auto line = "node " + nodes_[i].id + " at " + nodes_[i].address;
      if (reason.empty())
        log_lifecycle(line + " stopped");
      else
        log_line(line + " is dead: " + reason);
    }
}

} // namespace lumen::detail
