#pragma once

#include <string>

#include "lumen/init.hpp"

#include "node/node_manager.hpp"
#include "transport/address.hpp"

namespace lumen::detail {

/// How this process takes part in a cluster; each kind is an assembly
/// of parts in one process_runtime (process_runtime.hpp).
struct cluster_role {
  enum kind_t { embedded, driver, head, node } kind = embedded;
  address head_address; // driver and node: where the head listens
  std::string token;
  std::string hello_role = "driver"; // "client" for one-off queries
  node_settings serve;               // head and node: where and how to serve
};

/// Starts this process's runtime in `role`; throws `error` saying what
/// failed, or `usage_error` if it runs already.
void init_node(const init_options& opts, cluster_role role);

} // namespace lumen::detail
