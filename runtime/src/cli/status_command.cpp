// `lumen status`: the cluster's nodes as the head sees them.

#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "lumen/cluster.hpp"

#include "cli/commands.hpp"
#include "core/node_setup.hpp"
#include "core/process_runtime.hpp"
#include "node/bundle_keeper.hpp"
#include "security/token.hpp"

namespace lumen::detail {

namespace {

std::string port_of(const std::string& address) {
  auto colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(colon + 1);
}

} // namespace

int run_status(const status_options& o) {
  auto address = o.address;
  if (address.empty()) {
    auto env = std::getenv("LUMEN_ADDRESS");
    address = env && *env ? env : "127.0.0.1:6380";
  }
  cluster_role role;
  role.kind = cluster_role::driver;
  role.hello_role = "client";
  role.head_address = parse_address(address);
  role.token =
    read_token(o.token_file.empty() ? default_token_file() : o.token_file);
  init_options opts;
  opts.num_cpus = 1;
  opts.tls = o.tls;
  init_node(opts, role);
  auto all = nodes();
  shutdown();
  std::cout << std::left << std::setw(10) << "NODE" << std::setw(24)
            << "ADDRESS" << std::setw(7) << "DATA" << std::setw(8) << "STATE"
            << std::setw(8) << "ACTORS"
            << "RESOURCES (USED/TOTAL)\n";
  for (auto& n : all) {
    // used/total per resource, e.g. cpu=1/4,gpu=0/1; a placement group's
    // reserve shows as used, the names its bundles offer are left out.
    std::string res;
    for (auto& [k, v] : n.resources) {
      if (is_bundle_resource(k))
        continue;
      auto used = n.used.find(k);
      std::ostringstream x;
      x << k << "=" << (used == n.used.end() ? 0.0 : used->second) << "/" << v;
      res += (res.empty() ? "" : ",") + x.str();
    }
    // A dead node hosts nothing any more, whatever it last reported.
    std::cout << std::setw(10) << n.id << std::setw(24) << n.address
              << std::setw(7) << port_of(n.data_address) << std::setw(8)
              << (n.alive ? "alive" : "dead") << std::setw(8)
              << (n.alive ? std::to_string(n.actors) : "-") << res << "\n";
  }
  return exit_ok;
}

} // namespace lumen::detail
