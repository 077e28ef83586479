#include "lumen/caf_interop.hpp"

#include <caf/all.hpp>

#include "lumen/errors.hpp"

#include "embedded_runtime.hpp"

namespace lumen {

caf::actor_system& system() {
  return detail::embedded().system();
}

namespace detail {

void run_as_requester(std::function<void(caf::event_based_actor*)> job) {
  embedded().run_as_requester(std::move(job));
}

void adopt(caf::actor h) {
  embedded().adopt(std::move(h));
}

std::exception_ptr from_caf_error(const caf::error& err) {
  auto text = caf::to_string(err);
  if (err == caf::sec::request_receiver_down)
    return std::make_exception_ptr(
      actor_died("the typed actor is gone: " + text));
  return std::make_exception_ptr(
    task_error{"request to a typed actor", "caf::error", text, this_node()});
}

bool add_config_step(config_step step) {
  config_steps().push_back(std::move(step));
  return true;
}

std::vector<config_step>& config_steps() {
  // Never destroyed: filled during static initialization, in any order.
  static auto* steps = new std::vector<config_step>;
  return *steps;
}

caf::node_id caf_node_of(const std::string& node_id) {
  return embedded().caf_node_of(node_id);
}

uint64_t watch(caf::event_based_actor* self, const caf::actor& whom,
               std::function<void()> fail) {
  return embedded().watch(self, whom, std::move(fail));
}

void unwatch(const caf::actor_addr& whom, uint64_t token) {
  embedded().unwatch(whom, token);
}

std::exception_ptr request_dropped() {
  return std::make_exception_ptr(
    actor_died("the request was dropped unanswered: lumen::shutdown() was "
               "called first"));
}

} // namespace detail

} // namespace lumen
