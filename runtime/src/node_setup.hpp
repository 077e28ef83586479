#pragma once

#include "lumen/init.hpp"

#include "embedded_runtime.hpp"

namespace lumen {

/// Starts this process's runtime in a cluster role (head, node, client).
void init_node(const init_options& opts, detail::cluster_role role);

} // namespace lumen
