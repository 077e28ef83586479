// The process runtime's side of a cluster: joining one as a driver or as
// a node (assembling the cluster part), and what it hands that part.
#include "core/process_runtime.hpp"

#include "cluster/cluster_member.hpp"
#include "objects/object_exchange.hpp"

namespace lumen::detail {

cluster_part::~cluster_part() = default;

void process_runtime::join_as_driver(const address& head,
                                     const credentials& creds,
                                     const std::string& hello_role) {
  pulses_ = std::make_unique<pulse_service>(system(), creds.token);
  serve_channels(local_host_towards(head), creds);
  auto member = std::make_unique<cluster_member>(*this);
  auto& m = *member;
  join(std::move(member));
  // A one-off query sends no refs, so it serves none.
  if (hello_role == "driver")
    m.serve_data(local_host_towards(head), head, creds);
  m.connect(head, creds, hello_role);
  // Before the part monitors anything.
  requester_.hear_downs(
    [part = cluster_.get()](const caf::down_msg& msg) { part->on_down(msg); });
  m.watch_head(nullptr);
}

void process_runtime::join_as_node(node_settings serve, const address& head,
                                   const credentials& creds) {
  pulses_ = std::make_unique<pulse_service>(system(), creds.token);
  auto member = std::make_unique<cluster_member>(*this);
  auto& m = *member;
  join(std::move(member));
  auto control = m.serve_node(serve, head, creds);
  serve_channels(serve.host, creds);
  // Tasks and actors running here may send work to other nodes too.
  m.connect(serve.is_head ? address{serve.host, control} : head, creds,
            "client");
  // Before the part monitors anything.
  requester_.hear_downs(
    [part = cluster_.get()](const caf::down_msg& msg) { part->on_down(msg); });
  if (!serve.is_head)
    m.watch_head(m.rejoin());
}

void process_runtime::join(std::unique_ptr<cluster_part> part) {
  cluster_ = std::move(part);
}

bool process_runtime::here(const placement& where) const {
  if (!cluster_)
    return true; // checked by the caller: a node that is not this one fails
  return where.kind == placement::local ||
         (where.kind == placement::node && where.node_id == this_node());
}

std::vector<node_info> process_runtime::nodes() {
  if (cluster_)
    return cluster_->nodes();
  return {node_info{this_node(), "", true, resources_.total(), "", 0,
                    resources_.used()}};
}

std::vector<std::pair<std::string, std::shared_ptr<data_client>>>
process_runtime::node_connections() {
  if (!cluster_)
    return {};
  return cluster_->node_connections();
}

std::shared_ptr<data_client>
process_runtime::typed_route(const caf::node_id& nid) {
  return cluster_ ? cluster_->typed_route(nid) : nullptr;
}

std::string process_runtime::node_name_of(const caf::node_id& nid) {
  if (!nid || nid == sys_->node() || !cluster_)
    return this_node();
  auto id = cluster_->node_name_of(nid);
  return id.empty() ? "another process" : id;
}

std::shared_ptr<data_client>
process_runtime::connect_to(const std::string& address) {
  if (!cluster_)
    throw_no_cluster();
  return cluster_->connect_to(address);
}

actor_wire process_runtime::export_actor(const std::shared_ptr<actor_ref>& a) {
  if (!cluster_)
    throw_no_cluster();
  return cluster_->export_actor(a);
}

std::shared_ptr<actor_ref> process_runtime::import_actor(const actor_wire& w) {
  if (!cluster_)
    throw_no_cluster();
  return cluster_->import_actor(w);
}

actor_wire export_actor(const std::shared_ptr<actor_ref>& a) {
  return current_runtime().export_actor(a);
}

std::shared_ptr<actor_ref> import_actor(const actor_wire& w) {
  return current_runtime().import_actor(w);
}

} // namespace lumen::detail
