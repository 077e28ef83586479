#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lumen/cluster.hpp"
#include "lumen/detail/runtime.hpp"
#include "lumen/placement_group.hpp"

namespace lumen::detail {

/// The node of each bundle under `strategy`, chosen from the live `nodes`:
/// where the bundles are free as last reported if there is such a layout,
/// else where they fit in all (there they wait). Throws `usage_error`
/// (errc::infeasible) naming the bundle and the resource when no layout
/// can hold them, `actor_died` when no node is live.
std::vector<std::string> plan_bundles(const std::vector<node_info>& nodes,
                                      const std::vector<resource_request>& b,
                                      placement_strategy strategy,
                                      const std::string& group_id);

/// For work placed in a group, at submission: throws `usage_error` if the
/// group was removed, and (errc::infeasible) if the bundle meant (or, for
/// any, every bundle) has less of a resource than `r` asks.
void check_group_work(const placement& where, const resource_request& r);

/// For work placed in a group once the group is ready: where it goes (the
/// node of the bundle named, or of the next that holds `r`; here if that
/// is this process), and `r` as work in that bundle asks for it. Throws
/// ready()'s error if the group failed, else as check_group_work.
std::pair<placement, resource_request>
place_in_group(const placement& where, const resource_request& r);

} // namespace lumen::detail
