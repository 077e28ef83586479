#include "lumen/caf_interop.hpp"

#include <mutex>
#include <optional>
#include <unordered_map>

#include <caf/all.hpp>

#include "lumen/errors.hpp"

#include "core/process_runtime.hpp"
#include "transport/protocol.hpp"
#include "transport/typed_requests.hpp"

namespace lumen {

caf::actor_system& system() {
  return detail::this_runtime().system();
}

typed_actor_error::typed_actor_error(caf::error cause, std::string what,
                                     std::string node)
  : task_error(what, "request to a typed actor", "caf::error", what,
               std::move(node))
  , cause_(std::move(cause)) {}

namespace {

struct description {
  std::string who;
  std::function<std::string(uint8_t, const caf::message&)> what;
};

struct descriptions {
  std::mutex mtx;
  std::unordered_map<caf::atom_value, description> by_category;
};

descriptions& the_descriptions() {
  // Never destroyed: filled during static initialization, in any order.
  static auto* d = new descriptions;
  return *d;
}

/// "<who> on <node> <what>" for a category described, else nothing.
std::optional<std::string> described(const caf::error& err,
                                     const std::string& node) {
  auto& d = the_descriptions();
  std::lock_guard<std::mutex> guard{d.mtx};
  auto i = d.by_category.find(err.category());
  if (i == d.by_category.end())
    return std::nullopt;
  return i->second.who + " on " + node + " " +
         i->second.what(err.code(), err.context());
}

} // namespace

bool describe_errors(
  caf::atom_value category, std::string who,
  std::function<std::string(uint8_t code, const caf::message& context)> what) {
  auto& d = the_descriptions();
  std::lock_guard<std::mutex> guard{d.mtx};
  d.by_category[category] = {std::move(who), std::move(what)};
  return true;
}

namespace detail {

void run_as_requester(std::function<void(caf::event_based_actor*)> job) {
  this_runtime().run_as_requester(std::move(job));
}

void adopt(caf::actor h) {
  this_runtime().adopt(std::move(h));
}

std::exception_ptr from_caf_error(const caf::error& err,
                                  const caf::node_id& where) {
  auto text = caf::to_string(err);
  if (err == caf::sec::request_receiver_down)
    return std::make_exception_ptr(
      actor_died("the typed actor is gone: " + text));
  auto node = this_node();
  try {
    node = this_runtime().node_name_of(where);
  } catch (const usage_error&) {
    // Answered after shutdown: the node is no longer known.
  }
  auto said = described(err, node);
  return std::make_exception_ptr(typed_actor_error{
    err,
    said ? *said
         : "a typed actor on " + node + " answered with an error: " + text,
    node});
}

bool add_config_step(config_step step) {
  config_steps().push_back(std::move(step));
  return true;
}

} // namespace detail

void add_registrations(caf::actor_system_config& cfg) {
  for (auto& step : detail::config_steps())
    step(cfg);
}

namespace detail {

std::vector<config_step>& config_steps() {
  // Never destroyed: filled during static initialization, in any order.
  static auto* steps = new std::vector<config_step>;
  return *steps;
}

caf::strong_actor_ptr spawn_typed_on(const std::string& node_id,
                                     const std::string& name, caf::message args,
                                     const std::set<std::string>& interface) {
  auto fail = [&](const caf::error& err) {
    throw usage_error("cannot spawn '" + name + "' on node " + node_id + ": " +
                      system().render(err) +
                      " (is it registered with LUMEN_TYPED_ACTOR there, "
                      "with these argument types?)");
  };
  auto& rt = this_runtime();
  if (node_id == this_node() || node_id == "local") {
    auto h = rt.system().spawn<caf::actor>(name, std::move(args), nullptr, true,
                                           &interface);
    if (!h)
      fail(h.error());
    return caf::actor_cast<caf::strong_actor_ptr>(*h);
  }
  caf::strong_actor_ptr out;
  caf::scoped_actor self{rt.system()};
  self
    ->request(rt.manager_of(node_id), std::chrono::seconds(10),
              spawn_typed_atom::value, name, std::move(args), interface)
    .receive([&](caf::strong_actor_ptr& h) { out = std::move(h); },
             [&](caf::error& err) { fail(err); });
  return out;
}

uint64_t watch(caf::event_based_actor* self, const caf::actor& whom,
               std::function<void()> fail) {
  return this_runtime().watch(self, whom, std::move(fail));
}

void unwatch(const caf::actor_addr& whom, uint64_t token) {
  this_runtime().unwatch(whom, token);
}

bool send_typed(const caf::strong_actor_ptr& target, uint64_t sender,
                const caf::message& msg, typed_done done) {
  process_runtime* rt = nullptr;
  try {
    rt = &this_runtime();
  } catch (const usage_error&) {
    return false; // an actor system of the caller's own, not the runtime's
  }
  if (!target || target->home_system != &rt->system() ||
      target->node() == rt->system().node())
    return false;
  auto route = rt->typed_route(target->node());
  return route &&
         send_typed(*route, rt->system(), target, sender, msg, std::move(done));
}

std::exception_ptr request_dropped() {
  return std::make_exception_ptr(
    actor_died("the request was dropped unanswered: lumen::shutdown() was "
               "called first"));
}

} // namespace detail

} // namespace lumen
