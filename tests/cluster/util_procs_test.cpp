#define BOOST_TEST_MODULE util_procs
#include <boost/test/unit_test.hpp>

// lumen::util's queue and actor pool across real processes: a queue in
// this script or on a node, fed and drained by tasks on two other nodes; a
// pool of actors on two nodes.

#include <set>

#include "cluster_fixture.hpp"
#include "refs_job.hpp"

using namespace lumen::test;

BOOST_TEST_GLOBAL_FIXTURE(cluster_fixture);

BOOST_AUTO_TEST_SUITE(util_procs)

BOOST_AUTO_TEST_CASE(a_queue_here_links_a_producer_and_a_consumer_on_nodes) {
  lumen::util::queue<int> q{8}; // bounded: the producer waits for room
  auto produced = lumen::task(produce_into).on_node("node-1").remote(q, 500);
  auto consumed = lumen::task(consume_from).on_node("node-2").remote(q, 500);
  BOOST_TEST(lumen::get(produced, deadline) == 500);
  BOOST_TEST(lumen::get(consumed, deadline) == 124750);
  BOOST_TEST(q.empty());
}

BOOST_AUTO_TEST_CASE(
  a_queue_on_a_node_is_used_from_here_and_from_another_node) {
  lumen::util::queue<int> q{0, "node-1"};
  q.put(40);
  q.put(2);
  BOOST_TEST(
    lumen::get(lumen::task(consume_from).on_node("node-2").remote(q, 2),
               deadline) == 42);
  BOOST_CHECK_THROW(q.get(std::chrono::milliseconds(50)),
                    lumen::util::queue_empty);
}

BOOST_AUTO_TEST_CASE(an_actor_pool_spreads_work_over_actors_on_two_nodes) {
  lumen::util::actor_pool<Counter, std::string> pool{
    {lumen::actor<Counter>(0).on_node("node-1").remote(),
     lumen::actor<Counter>(0).on_node("node-2").remote()}};
  auto places = pool.map([](auto& c, int) { return c.call(&Counter::node); },
                         std::vector<int>(20, 0));
  BOOST_TEST(places.size() == 20u);
  std::set<std::string> seen(places.begin(), places.end());
  BOOST_TEST((seen == std::set<std::string>{"node-1", "node-2"}));
}

BOOST_AUTO_TEST_SUITE_END()
