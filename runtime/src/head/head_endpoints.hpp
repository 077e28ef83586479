#pragma once

#include <optional>
#include <string>

#include <caf/actor.hpp>

#include "cluster/head_link.hpp"
#include "core/process_services.hpp"

namespace lumen::detail {

/// Channel names (lumen/channel.hpp) in the head's directory, for one
/// process. The head frees the names of a process that died: it watches an
/// actor the process keeps for that alone.
class head_endpoints {
public:
  head_endpoints(process_services& rt, head_link& head);

  /// Registers `name` at `address`; false if another listener has it.
  /// Throws `errc::head_unreachable` if the head is lost.
  bool bind(const std::string& name, const std::string& address);

  std::optional<std::string> find(const std::string& name);

  /// Frees `name`; best effort (a lost head forgot it anyway).
  void drop(const std::string& name);

private:
  caf::actor_system& sys_;
  head_link& head_;
  caf::actor owner_;
};

} // namespace lumen::detail
