#include "cluster/node_links.hpp"

#include <caf/all.hpp>

#include "transport/address.hpp"
#include "transport/control_link.hpp"

namespace lumen::detail {

node_links::node_links(process_services& rt, credentials creds, head_link& head,
                       directory_cache& directory, lost_fn on_lost)
  : rt_(rt)
  , creds_(std::move(creds))
  , head_(head)
  , directory_(directory)
  , on_lost_(std::move(on_lost)) {}

node_links::link node_links::get(const std::string& node_id) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = links_.find(node_id);
    if (i != links_.end() && !i->second.data->closed())
      return i->second;
  }
  std::string address, data_address;
  auto entry = directory_.find(node_id);
  if (!entry) {
    // A handle from another process may name a node this one has not seen.
    directory_.learn_of(node_id);
    entry = directory_.find(node_id);
  }
  if (entry) {
    address = entry->address;
    data_address = entry->data_address;
  }
  auto& sys = rt_.system();
  link fresh;
  if (node_id == "head") {
    fresh.manager = head_.get();
  } else {
    fresh.manager =
      connect_control(sys, parse_address(address), creds_, "node " + node_id);
    say_hello(sys, fresh.manager, "driver", "node " + node_id);
  }
  fresh.data =
    std::make_shared<data_client>(data_address, creds_, "node " + node_id);
  fresh.data->start();
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& slot = links_[node_id];
    if (slot.data && !slot.data->closed()) {
      // Another thread connected first: use its link, drop ours.
      retired_.push_back(fresh.data);
      fresh.data->fail_all("superseded");
      return slot;
    }
    if (slot.data)
      retired_.push_back(std::move(slot.data)); // closed, see above
    slot = fresh;
  }
  rt_.run_as_requester([mgr = fresh.manager](caf::event_based_actor* self) {
    self->monitor(mgr);
  });
  return fresh;
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
    if (l.manager.node() == nid && !l.data->closed())
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
  return first_node([&](const link& l) { return l.manager.node() == nid; });
}

std::string node_links::node_of(const caf::actor_addr& manager) {
  return first_node(
    [&](const link& l) { return l.manager.address() == manager; });
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
