#define BOOST_TEST_MODULE placement_group_procs
#include <boost/test/unit_test.hpp>

// Placement groups across real processes: the strategies lay bundles over
// the head and two nodes, work placed in a bundle runs on its node and from
// its reserve, removing the group ends its actor there, and a group whose
// script is killed with SIGKILL is given back by its node.

#include <csignal>
#include <set>

#include "cluster_fixture.hpp"
#include "cluster_job.hpp"

using namespace lumen::test;
using lumen::placement_strategy;

BOOST_TEST_GLOBAL_FIXTURE(cluster_fixture);

namespace {

double used_on(const std::string& node, const std::string& name) {
  for (auto& n : lumen::nodes())
    if (n.id == node) {
      auto i = n.used.find(name);
      return i == n.used.end() ? 0.0 : i->second;
    }
  return -1;
}

/// Polls the directory (nodes report every 200 ms, a driver's view is a
/// second old at most).
bool use_becomes(const std::string& node, const std::string& name,
                 double amount) {
  return eventually([&] { return used_on(node, name) == amount; },
                    milliseconds(50));
}

std::vector<std::string> nodes_of(const lumen::placement_group& pg) {
  std::vector<std::string> out;
  for (size_t i = 0; i < pg.bundles().size(); ++i)
    out.push_back(pg.bundle_node(i));
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(placement_group_procs)

BOOST_AUTO_TEST_CASE(strict_spread_gives_each_bundle_a_node_of_its_own) {
  lumen::placement_group pg({{{"cpu", 1}}, {{"cpu", 1}}, {{"cpu", 1}}},
                            placement_strategy::strict_spread);
  lumen::get(pg.ready(), deadline);
  auto homes = nodes_of(pg);
  BOOST_TEST((std::set<std::string>(homes.begin(), homes.end()) ==
              std::set<std::string>{"head", "node-1", "node-2"}));
  for (int i = 0; i < 3; ++i) {
    // Work in bundle i runs on its node; the node counts the reserve.
    auto t = lumen::task(where).in_placement_group(pg, i).remote();
    BOOST_TEST(lumen::get(t, deadline) == homes[i]);
    BOOST_TEST(use_becomes(homes[i], "cpu", 1.0));
  }
  lumen::remove_placement_group(pg);
  for (auto& n : homes)
    BOOST_TEST(use_becomes(n, "cpu", 0.0));
}

BOOST_AUTO_TEST_CASE(pack_and_spread_lay_bundles_as_they_say) {
  lumen::placement_group packed({{{"cpu", 1}}, {{"cpu", 1}}},
                                placement_strategy::strict_pack);
  lumen::get(packed.ready(), deadline);
  BOOST_TEST(packed.bundle_node(0) == packed.bundle_node(1));
  lumen::remove_placement_group(packed);
  // Each node has two CPUs: bundles of two each cannot share one.
  lumen::placement_group wide({{{"cpu", 2}}, {{"cpu", 2}}},
                              placement_strategy::pack);
  lumen::get(wide.ready(), deadline);
  BOOST_TEST(wide.bundle_node(0) != wide.bundle_node(1));
  lumen::remove_placement_group(wide);
  lumen::placement_group spread({{{"cpu", 1}}, {{"cpu", 1}}},
                                placement_strategy::spread);
  lumen::get(spread.ready(), deadline);
  BOOST_TEST(spread.bundle_node(0) != spread.bundle_node(1));
  lumen::remove_placement_group(spread);
  // Four bundles cannot each have one of three nodes.
  try {
    lumen::placement_group pg(
      {{{"cpu", 1}}, {{"cpu", 1}}, {{"cpu", 1}}, {{"cpu", 1}}},
      placement_strategy::strict_spread);
    BOOST_FAIL("four bundles were spread over three nodes");
  } catch (const lumen::usage_error& e) {
    BOOST_TEST((e.code() == lumen::errc::infeasible));
    BOOST_TEST(std::string{e.what()}.find("strict_spread") !=
               std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(removing_the_group_ends_its_actor_on_the_node) {
  lumen::placement_group pg({{{"cpu", 1}}}, placement_strategy::pack);
  auto c = lumen::actor<Counter>(1)
             .with_num_cpus(1)
             .in_placement_group(pg, 0)
             .remote();
  BOOST_TEST(lumen::get(c.call(&Counter::node), deadline) == pg.bundle_node(0));
  lumen::remove_placement_group(pg);
  try {
    lumen::get(c.call(&Counter::add, 1), deadline);
    BOOST_FAIL("the actor outlived its group");
  } catch (const lumen::actor_died& e) {
    BOOST_TEST(std::string{e.what()}.find("placement group " + pg.id()) !=
               std::string::npos);
  }
  BOOST_TEST(use_becomes(pg.bundle_node(0), "cpu", 0.0));
}

BOOST_AUTO_TEST_CASE(a_killed_scripts_group_is_given_back) {
  static started_node gpu = the_cluster->start(
    {"--address", the_cluster->head.address, "--resources", "gpu=1"});
  process script({SECOND_DRIVER, the_cluster->head.address,
                  the_cluster->token_file, "-", "hold-group"},
                 the_cluster->env());
  auto out = script.await_output("group ready on", deadline);
  BOOST_REQUIRE_MESSAGE(out, "the group was not made: " << script.output());
  BOOST_TEST(out->find("group ready on " + gpu.id) != std::string::npos);
  BOOST_TEST(use_becomes(gpu.id, "gpu", 1.0));
  script.kill(SIGKILL);
  script.wait();
  // Its node sees the script's connection go and releases the bundle.
  BOOST_TEST(use_becomes(gpu.id, "gpu", 0.0));
  // The GPU serves the next one.
  lumen::placement_group mine({{{"gpu", 1}}});
  lumen::get(mine.ready(), deadline);
  BOOST_TEST(mine.bundle_node(0) == gpu.id);
  lumen::remove_placement_group(mine);
}

BOOST_AUTO_TEST_SUITE_END()
