#include "head_endpoints.hpp"

#include <caf/all.hpp>

#include "protocol.hpp"

namespace lumen::detail {

namespace {

caf::behavior endpoint_owner() {
  return {[](drop_endpoint_atom) {}};
}

} // namespace

head_endpoints::head_endpoints(process_services& rt, head_link& head)
  : sys_(rt.system())
  , head_(head)
  , owner_(sys_.spawn(endpoint_owner)) {
  rt.adopt(owner_);
}

bool head_endpoints::bind(const std::string& name, const std::string& address) {
  bool bound = false;
  caf::scoped_actor self{sys_};
  self
    ->request(head_.get(), head_timeout, endpoint_atom::value, name, address,
              owner_)
    .receive(
      [&](bool ok) { bound = ok; },
      [&](caf::error& err) { throw head_.unreachable(sys_.render(err)); });
  return bound;
}

std::optional<std::string> head_endpoints::find(const std::string& name) {
  std::optional<std::string> found;
  caf::scoped_actor self{sys_};
  self->request(head_.get(), head_timeout, find_endpoint_atom::value, name)
    .receive(
      [&](bool ok, std::string& address) {
        if (ok)
          found = std::move(address);
      },
      [&](caf::error& err) { throw head_.unreachable(sys_.render(err)); });
  return found;
}

void head_endpoints::drop(const std::string& name) {
  try {
    caf::anon_send(head_.get(), drop_endpoint_atom::value, name, owner_);
  } catch (const error&) {
    // The head is lost; a new one starts with no names.
  }
}

} // namespace lumen::detail
