#include "cluster/node_links.hpp"

#include <caf/all.hpp>

#include "transport/address.hpp"
#include "transport/control_link.hpp"

namespace lumen::detail {

node_links::node_links(process_services& rt, credentials creds, head_link& head,
                       directory_cache& directory, bool data_alone,
                       lost_fn on_lost)
  : rt_(rt)
  , creds_(std::move(creds))
  , head_(head)
  , directory_(directory)
  , data_alone_(data_alone)
  , on_lost_(std::move(on_lost)) {}

node_info node_links::entry_of(const std::string& node_id) {
  auto entry = directory_.find(node_id);
  if (!entry) {
    // A handle from another process may name a node this one has not seen.
    directory_.learn_of(node_id);
    entry = directory_.find(node_id);
  }
  return entry ? *entry : node_info{};
}

std::shared_ptr<data_client>
node_links::connect_data(const std::string& node_id,
                         const std::string& data_address) {
  auto data =
    std::make_shared<data_client>(data_address, creds_, "node " + node_id);
  data->start();
  return data;
}

bool node_links::keep_or_drop(link& slot, std::shared_ptr<data_client> fresh) {
  if (slot.data && !slot.data->closed()) {
    // Another thread connected first: use its connection, drop ours.
    if (fresh && fresh != slot.data) {
      retired_.push_back(fresh);
      fresh->fail_all("superseded");
    }
    return false;
  }
  if (slot.data)
    retired_.push_back(std::move(slot.data)); // closed, see above
  slot.data = std::move(fresh);
  return true;
}

node_links::link node_links::get(const std::string& node_id) {
  std::shared_ptr<data_client> data;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = links_.find(node_id);
    if (i != links_.end() && !i->second.data->closed()) {
      if (i->second.manager)
        return i->second;
      data = i->second.data; // a data-plane link alone: the control link too
    }
  }
  auto entry = entry_of(node_id);
  auto& sys = rt_.system();
  caf::actor manager;
  if (node_id == "head") {
    manager = head_.get();
  } else {
    manager = connect_control(sys, parse_address(entry.address), creds_,
                              "node " + node_id);
    say_hello(sys, manager, "driver", "node " + node_id);
  }
  if (!data)
    data = connect_data(node_id, entry.data_address);
  link out;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& slot = links_[node_id];
    bool ours = keep_or_drop(slot, data) || slot.data == data;
    if (slot.manager && !ours)
      return slot; // another thread linked it first
    slot.manager = manager;
    slot.process = manager.node();
    out = slot;
  }
  rt_.run_as_requester(
    [manager](caf::event_based_actor* self) { self->monitor(manager); });
  return out;
}

std::shared_ptr<data_client> node_links::data(const std::string& node_id,
                                              const caf::node_id& process) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = links_.find(node_id);
    if (i != links_.end() && !i->second.data->closed()) {
      if (i->second.process == caf::node_id{})
        i->second.process = process; // linked for work first
      return i->second.data;
    }
  }
  auto fresh = connect_data(node_id, entry_of(node_id).data_address);
  std::lock_guard<std::mutex> guard{mtx_};
  auto& slot = links_[node_id];
  if (keep_or_drop(slot, std::move(fresh)) || slot.process == caf::node_id{})
    slot.process = process;
  return slot.data;
}

void node_links::lose(const std::string& node_id, const data_client* failed,
                      const std::string& why) {
  std::shared_ptr<data_client> data;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = links_.find(node_id);
    if (i == links_.end() ||
        (failed != nullptr && i->second.data.get() != failed))
      return; // an old connection's news: the node has a new one
    directory_.mark_dead(node_id);
    data = i->second.data;
    retired_.push_back(data);
    links_.erase(i);
  }
  on_lost_(node_id, why, std::move(data));
}

std::shared_ptr<data_client> node_links::linked(const caf::node_id& nid) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& [id, l] : links_)
    if (l.process == nid && !l.data->closed())
      return l.data;
  return nullptr;
}

template <class Match>
std::string node_links::first_node(Match match) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& [id, l] : links_)
    if (match(l))
      return id;
  return {};
}

std::string node_links::node_of(const caf::node_id& nid) {
  return first_node([&](const link& l) { return l.process == nid; });
}

std::string node_links::node_of(const caf::actor_addr& manager) {
  return first_node(
    [&](const link& l) { return l.manager && l.manager.address() == manager; });
}

std::set<std::string> node_links::data_only() {
  std::set<std::string> out;
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& [id, l] : links_)
    if (!l.manager)
      out.insert(id);
  return out;
}

void node_links::close_all() {
  std::vector<std::shared_ptr<data_client>> all;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& [id, l] : links_)
      all.push_back(std::move(l.data));
    links_.clear();
    for (auto& d : retired_)
      all.push_back(std::move(d));
    retired_.clear();
  }
  for (auto& d : all)
    if (d)
      d->stop("the runtime shut down");
}

} // namespace lumen::detail
