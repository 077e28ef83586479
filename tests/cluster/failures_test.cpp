#define BOOST_TEST_MODULE failures
#include <boost/test/unit_test.hpp>

// Real failures: a node killed with SIGKILL; what was placed on it fails
// fast, is retried or rebuilt elsewhere.

#include <lumen/caf_interop.hpp>

#include "cluster_fixture.hpp"
#include "cluster_job.hpp"

using namespace lumen::test;

BOOST_TEST_GLOBAL_FIXTURE(cluster_fixture);

BOOST_AUTO_TEST_SUITE(failures)

BOOST_AUTO_TEST_CASE(killing_a_node_fails_its_work_fast_and_marks_it_dead) {
  auto& cl = *the_cluster;
  auto victim = cl.start({"--address", cl.head.address});
  auto actor = lumen::actor<Counter>(0).on_node(victim.id).remote();
  BOOST_TEST(lumen::get(actor.call(&Counter::node), deadline) == victim.id);
  auto call = actor.call(&Counter::nap, 60000);
  auto phoenix
    = lumen::actor<Counter>(7).on_node(victim.id).with_max_restarts(1).remote();
  auto phoenix_call = phoenix.call(&Counter::nap, 60000);
  auto pinned = lumen::task(busy).on_node(victim.id).remote(60000);
  auto silent = lumen::spawn_on<silent_actor>(victim.id, "silent");
  auto typed_call = lumen::call(silent, ask_atom::value);
  std::vector<lumen::ObjectRef<std::string>> spread;
  for (int i = 0; i < 8; ++i)
    spread.push_back(lumen::task(busy_on).spread().with_max_retries(3).remote(
      victim.id));
  // Everything has reached the victim once its busy tasks are running.
  BOOST_TEST(!lumen::wait(std::vector{pinned}, 1, milliseconds(300))
                .pending.empty());
  auto killed_at = steady_clock::now();
  victim.proc->kill(SIGKILL);

  BOOST_CHECK_THROW(lumen::get(call, deadline), lumen::actor_died);
  BOOST_TEST(seconds_since(killed_at) < 2.0);
  BOOST_CHECK_THROW(lumen::get(pinned, deadline), lumen::actor_died);
  BOOST_TEST(seconds_since(killed_at) < 2.0);
  BOOST_CHECK_THROW(lumen::get(typed_call, deadline), lumen::actor_died);
  BOOST_TEST(seconds_since(killed_at) < 2.0);

  // The head marks the node dead within 2 s.
  bool dead = false;
  while (!dead && seconds_since(killed_at) < 2.0)
    dead = ids(lumen::nodes(), false).count(victim.id) > 0;
  BOOST_TEST(dead);

  // An actor with restarts left is rebuilt on a live node: the call it was
  // running fails, later calls reach the new instance.
  BOOST_CHECK_THROW(lumen::get(phoenix_call, deadline), lumen::actor_died);
  auto reborn_on = lumen::get(phoenix.call(&Counter::node), deadline);
  BOOST_TEST(reborn_on != victim.id);
  BOOST_TEST(lumen::get(phoenix.call(&Counter::add, 1), deadline) == 8);
  BOOST_TEST(phoenix.num_restarts() == 1);
  BOOST_TEST(phoenix.alive());
  BOOST_TEST(!actor.alive());

  // Spread tasks caught on the victim ran again elsewhere.
  for (auto& place : lumen::get(spread, deadline))
    BOOST_TEST(place != victim.id);
  BOOST_CHECK_THROW(lumen::get(actor.call(&Counter::add, 1), deadline),
                    lumen::actor_died);

  auto [code, out] = lumen::test::run(
    {LUMEN_CLI, "status", "--address", cl.head.address, "--token-file",
     cl.token_file},
    cl.env());
  BOOST_TEST(code == 0);
  BOOST_TEST(lumen::test::status_of(out, victim.id) == "dead", out);
  BOOST_TEST(lumen::get(lumen::task(where).on_node("node-1").remote(),
                        deadline)
             == "node-1");

  // A node started again joins as a new node and takes work.
  auto again = cl.start({"--address", cl.head.address});
  BOOST_TEST(again.id != victim.id);
  BOOST_TEST(lumen::get(lumen::task(where).on_node(again.id).remote(),
                        deadline)
             == again.id);
  again.proc->kill(SIGTERM);
}


BOOST_AUTO_TEST_SUITE_END()
