#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "lumen/init.hpp"

#include "embedded_runtime.hpp"

namespace lumen {

/// Splits HOST:PORT; throws `usage_error` naming the bad text.
std::pair<std::string, uint16_t> parse_address(const std::string& address);

/// Starts this process's runtime in a cluster role (head, node, client).
void init_node(const init_options& opts, detail::cluster_role role);

} // namespace lumen
