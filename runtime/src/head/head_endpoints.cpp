#include "head/head_endpoints.hpp"

#include <caf/all.hpp>

#include "transport/protocol.hpp"

namespace lumen::detail {

namespace {

// A class, not a function: CAF 0.17 dereferences a null argument tuple
// when it spawns a function actor with no arguments. UBSan reports that,
// and matching the report to its suppression symbolizes it, which first
// reads every library's debug sections: 3% of a sanitized training test's
// time went there, once in each of its nodes.
class endpoint_owner : public caf::event_based_actor {
public:
  using caf::event_based_actor::event_based_actor;

  caf::behavior make_behavior() override {
    return {[](drop_endpoint_atom) {}};
  }
};

} // namespace

head_endpoints::head_endpoints(process_services& rt, head_link& head)
  : sys_(rt.system())
  , head_(head)
  , owner_(sys_.spawn<endpoint_owner>()) {
  rt.adopt(owner_);
}

bool head_endpoints::bind(const std::string& name, const std::string& address) {
  bool bound = false;
  head_.ask([&](bool ok) { bound = ok; }, endpoint_atom::value, name, address,
            owner_);
  return bound;
}

std::optional<std::string> head_endpoints::find(const std::string& name) {
  return head_.ask_for_string(find_endpoint_atom::value, name);
}

void head_endpoints::drop(const std::string& name) {
  try {
    caf::anon_send(head_.get(), drop_endpoint_atom::value, name, owner_);
  } catch (const error&) {
    // The head is lost; a new one starts with no names.
  }
}

} // namespace lumen::detail
