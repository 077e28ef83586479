#include "lumen/errors.hpp"

#include "sim/sim_host.hpp"
#include "sim/sim_runtime.hpp"

// Refs and actor handles inside values, in a simulated run. The run is one
// process: a wire carries the number under which the run keeps the object
// or actor, and the receiver gets the very same state back, as a cluster's
// owner does when one of its refs comes home.

namespace lumen::detail {

namespace {

const std::string wire_owner = "simulated";

} // namespace

ref_wire sim_runtime::export_object(const std::shared_ptr<object_state>& st,
                                    uint64_t type, value_encoder) {
  sent_objects_.emplace_back(st, type);
  ref_wire w;
  w.owner = wire_owner;
  w.node = world_.node_name(world_.here());
  w.object = sent_objects_.size();
  w.type = type;
  return w;
}

imported_object sim_runtime::import_object(const ref_wire& w) {
  if (w.owner != wire_owner || w.object == 0 ||
      w.object > sent_objects_.size() ||
      sent_objects_[w.object - 1].second != w.type)
    throw codec_error("a ref to object " + std::to_string(w.object) +
                      " names none of this simulated run's objects of that "
                      "type");
  return {sent_objects_[w.object - 1].first, nullptr};
}

actor_wire sim_runtime::export_actor(const std::shared_ptr<actor_ref>& a) {
  sent_actors_.push_back(a);
  actor_wire w;
  w.cls = a->core->cls.name;
  w.name = a->core->opts.name;
  w.id = id_of(*a);
  w.node = wire_owner;
  w.remote_id = sent_actors_.size();
  return w;
}

std::shared_ptr<actor_ref> sim_runtime::import_actor(const actor_wire& w) {
  if (w.node != wire_owner || w.remote_id == 0 ||
      w.remote_id > sent_actors_.size())
    throw codec_error("a handle to actor " + w.id +
                      " names none of this simulated run's actors");
  return sent_actors_[w.remote_id - 1];
}

} // namespace lumen::detail
