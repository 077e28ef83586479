#include "lumen/caf_interop.hpp"

#include <mutex>
#include <optional>
#include <unordered_map>

#include <caf/all.hpp>

#include "lumen/detail/runtime.hpp"
#include "lumen/errors.hpp"

#include "transport/typed_host.hpp"

namespace lumen {

caf::actor_system& system() {
  return detail::this_typed_host().system();
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
  this_typed_host().run_as_requester(std::move(job));
}

void adopt(caf::actor h) {
  this_typed_host().adopt(std::move(h));
}

std::exception_ptr from_caf_error(const caf::error& err,
                                  const caf::actor_addr& where) {
  auto text = caf::to_string(err);
  if (err == caf::sec::request_receiver_down)
    return std::make_exception_ptr(
      actor_died("the typed actor is gone: " + text));
  // Answered after shutdown, the node is no longer known.
  auto* host = running_typed_host();
  auto node = host != nullptr ? host->node_of(where) : this_node();
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
  auto& host = this_typed_host();
  auto h = host.spawn_typed(node_id, name, std::move(args), interface);
  if (!h)
    throw usage_error("cannot spawn '" + name + "' on node " + node_id + ": " +
                      host.system().render(h.error()) +
                      " (is it registered with LUMEN_TYPED_ACTOR there, "
                      "with these argument types?)");
  return std::move(*h);
}

uint64_t watch(caf::event_based_actor* self, const caf::actor& whom,
               std::function<void()> fail) {
  return this_typed_host().watch(self, whom, std::move(fail));
}

void unwatch(const caf::actor_addr& whom, uint64_t token) {
  this_typed_host().unwatch(whom, token);
}

bool send_typed(const caf::strong_actor_ptr& target, uint64_t sender,
                const caf::message& msg, bool carries_handles,
                typed_done done) {
  // An actor system of the caller's own, not the runtime's, has no route.
  auto* host = running_typed_host();
  return host != nullptr && host->send_typed(target, sender, msg,
                                             carries_handles, std::move(done));
}

std::exception_ptr request_dropped() {
  return std::make_exception_ptr(
    actor_died("the request was dropped unanswered: lumen::shutdown() was "
               "called first"));
}

} // namespace detail

} // namespace lumen
