#define BOOST_TEST_MODULE placement_plan
#include <boost/test/unit_test.hpp>

// How the strategies lay bundles over nodes (plan_bundles, no processes):
// where they are free as last reported first, where they fit in all next,
// and an impossible layout refused naming what does not fit.

#include <string>
#include <vector>

#include <lumen/errors.hpp>

#include "node/placement_groups.hpp"

using lumen::node_info;
using lumen::placement_strategy;
using lumen::detail::plan_bundles;
using lumen::detail::resource_request;

namespace {

node_info node(std::string id, double cpus, double used = 0,
               bool alive = true) {
  node_info n;
  n.id = std::move(id);
  n.alive = alive;
  n.resources = {{"cpu", cpus}};
  if (used > 0)
    n.used = {{"cpu", used}};
  return n;
}

std::vector<resource_request> cpus(std::vector<double> amounts) {
  std::vector<resource_request> out;
  for (auto a : amounts)
    out.push_back({{"cpu", a}});
  return out;
}

std::vector<std::string> plan(const std::vector<node_info>& nodes,
                              const std::vector<resource_request>& bundles,
                              placement_strategy s) {
  return plan_bundles(nodes, bundles, s, "test");
}

using names = std::vector<std::string>;

} // namespace

BOOST_AUTO_TEST_CASE(pack_fills_one_node_then_the_next) {
  std::vector<node_info> ns{node("a", 2), node("b", 4)};
  BOOST_TEST(
    (plan(ns, cpus({1, 1}), placement_strategy::pack) == names{"a", "a"}));
  BOOST_TEST((plan(ns, cpus({2, 2, 2}), placement_strategy::pack) ==
              names{"a", "b", "b"}));
  // A node whose CPUs are busy now is passed over while another is free.
  ns[0] = node("a", 2, 2);
  BOOST_TEST(
    (plan(ns, cpus({1, 1}), placement_strategy::pack) == names{"b", "b"}));
}

BOOST_AUTO_TEST_CASE(spread_uses_as_many_nodes_as_it_can) {
  std::vector<node_info> ns{node("a", 4), node("b", 4), node("c", 4, 0, false)};
  BOOST_TEST((plan(ns, cpus({1, 1, 1}), placement_strategy::spread) ==
              names{"a", "b", "a"}));
  BOOST_TEST((plan(ns, cpus({1, 1}), placement_strategy::strict_spread) ==
              names{"a", "b"}));
}

BOOST_AUTO_TEST_CASE(busy_nodes_still_take_bundles_that_fit_in_all) {
  // Nothing is free now: the bundles wait where they fit in all.
  std::vector<node_info> ns{node("a", 2, 2), node("b", 2, 2)};
  BOOST_TEST(
    (plan(ns, cpus({2, 2}), placement_strategy::pack) == names{"a", "b"}));
  BOOST_TEST((plan(ns, cpus({1, 1}), placement_strategy::strict_pack) ==
              names{"a", "a"}));
}

BOOST_AUTO_TEST_CASE(impossible_layouts_are_refused_naming_the_bundle) {
  std::vector<node_info> ns{node("a", 2), node("b", 2)};
  auto refused = [&](const std::vector<resource_request>& b,
                     placement_strategy s, const std::string& says) {
    try {
      plan(ns, b, s);
    } catch (const lumen::usage_error& e) {
      BOOST_TEST((e.code() == lumen::errc::infeasible));
      BOOST_TEST(std::string{e.what()}.find(says) != std::string::npos,
                 e.what());
      return;
    }
    BOOST_FAIL("the layout was not refused");
  };
  refused(cpus({1, 1, 1}), placement_strategy::strict_spread, "bundle 2");
  refused(cpus({2, 1}), placement_strategy::strict_pack, "cpu=3");
  refused(cpus({3}), placement_strategy::pack, "bundle 0 (cpu=3)");
  refused({{{"gpu", 1}}}, placement_strategy::spread, "gpu=1");
  BOOST_CHECK_THROW(
    plan({node("a", 2, 0, false)}, cpus({1}), placement_strategy::pack),
    lumen::actor_died);
}
