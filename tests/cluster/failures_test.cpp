#define BOOST_TEST_MODULE failures
#include <boost/test/unit_test.hpp>

// Real failures: a node killed with SIGKILL, whose work fails fast, is
// retried or rebuilt elsewhere; a head killed with SIGKILL and restarted;
// a node paused past the heartbeat timeout and resumed.

#include <functional>
#include <thread>

#include <lumen/caf_interop.hpp>

#include "cluster_fixture.hpp"
#include "cluster_job.hpp"

using namespace lumen::test;
using lumen::errc;

namespace {

/// The port of HOST:PORT.
std::string port_of(const std::string& address) {
  return address.substr(address.rfind(':') + 1);
}

/// Waits up to `limit` seconds for the state `done` checks (the head's
/// view, this driver's), asking every 50 ms; true if it came. The limit is
/// the figure under test, not a guess at when something happened.
template <class F>
bool within(double limit, F done) {
  return eventually(done, milliseconds(50),
                    duration_cast<milliseconds>(duration<double>(limit)));
}

/// Whether the head counts `id` dead, as `lumen status` shows it.
bool head_says_dead(const cluster& cl, const std::string& id) {
  return status_of(cl.status().second, id) == "dead";
}

errc code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lumen::error& e) {
    return e.code();
  }
  return errc{};
}

} // namespace

// Each test has a cluster of its own: they kill its processes.
BOOST_FIXTURE_TEST_SUITE(failures, cluster)

BOOST_AUTO_TEST_CASE(killing_a_node_fails_its_work_fast_and_marks_it_dead) {
  auto& cl = *this;
  auto victim = cl.start({"--address", cl.head.address});
  std::string victim_data;
  for (auto& n : lumen::nodes())
    if (n.id == victim.id)
      victim_data = n.data_address;
  auto actor = lumen::actor<Counter>(0).on_node(victim.id).remote();
  BOOST_TEST(lumen::get(actor.call(&Counter::node), deadline) == victim.id);
  auto call = actor.call(&Counter::nap, 60000);
  auto phoenix =
    lumen::actor<Counter>(7).on_node(victim.id).with_max_restarts(1).remote();
  auto phoenix_call = phoenix.call(&Counter::nap, 60000);
  auto retrier = lumen::actor<Counter>(7)
                   .on_node(victim.id)
                   .with_max_restarts(1)
                   .with_max_task_retries(1)
                   .remote();
  auto retried_nap = retrier.call(&Counter::nap, 1500);
  auto retried_add = retrier.call(&Counter::add, 1); // queued behind the nap
  auto pinned = lumen::task(busy).on_node(victim.id).remote(60000);
  auto silent = lumen::spawn_on<silent_actor>(victim.id, "silent");
  auto typed_call = lumen::call(silent, ask_atom::value);
  std::vector<lumen::ObjectRef<std::string>> spread;
  for (int i = 0; i < 8; ++i)
    spread.push_back(
      lumen::task(busy_on).spread().with_max_retries(3).remote(victim.id));
  // Everything has reached the victim once its busy tasks are running.
  BOOST_TEST(
    !lumen::wait(std::vector{pinned}, 1, milliseconds(300)).pending.empty());
  auto killed_at = steady_clock::now();
  victim.proc->kill(SIGKILL);

  // The call was running there: it says so, not that it never ran.
  BOOST_CHECK_EXCEPTION(lumen::get(call, deadline), lumen::actor_died,
                        [](const lumen::actor_died& e) {
                          return std::string{e.what()}.find(
                                   "went down before it answered") !=
                                 std::string::npos;
                        });
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
  // With a task retry, the calls that were on their way or running there
  // run again on the rebuilt instance, in their order.
  BOOST_TEST(lumen::get(retried_nap, deadline) == 7);
  BOOST_TEST(lumen::get(retried_add, deadline) == 8);
  BOOST_TEST(lumen::get(retrier.call(&Counter::node), deadline) != victim.id);
  BOOST_TEST(retrier.num_restarts() == 1);
  BOOST_TEST(!actor.alive());

  // Spread tasks caught on the victim ran again elsewhere.
  for (auto& place : lumen::get(spread, deadline))
    BOOST_TEST(place != victim.id);
  BOOST_CHECK_THROW(lumen::get(actor.call(&Counter::add, 1), deadline),
                    lumen::actor_died);

  auto [code, out] =
    lumen::test::run({LUMEN_CLI, "status", "--address", cl.head.address,
                      "--token-file", cl.token_file},
                     cl.env());
  BOOST_TEST(code == 0);
  BOOST_TEST(lumen::test::status_of(out, victim.id) == "dead", out);
  // A dead node's row shows its data port, and no actors as if live.
  auto row = status_row(out, victim.id);
  BOOST_REQUIRE(row.size() > 4);
  BOOST_TEST(row[2] == port_of(victim_data), out);
  BOOST_TEST(row[4] == "-", out);
  BOOST_TEST(lumen::get(lumen::task(where).on_node("node-1").remote(),
                        deadline) == "node-1");

  // A node started again joins as a new node and takes work.
  auto again = cl.start({"--address", cl.head.address});
  BOOST_TEST(again.id != victim.id);
  BOOST_TEST(lumen::get(lumen::task(where).on_node(again.id).remote(),
                        deadline) == again.id);
  again.proc->kill(SIGTERM);
}

BOOST_AUTO_TEST_CASE(a_lost_head_is_noticed_and_work_on_live_nodes_goes_on) {
  auto& cl = *this;
  auto keeper = lumen::actor<Counter>(40)
                  .on_node(cl.nodes[0].id)
                  .with_name("keeper")
                  .remote();
  auto counter = lumen::actor<Counter>(0).on_node(cl.nodes[1].id).remote();
  BOOST_TEST(lumen::get(keeper.call(&Counter::add, 1), deadline) == 41);
  auto killed_at = steady_clock::now();
  cl.head.proc->kill(SIGKILL);

  // Nodes and this driver notice within 2 s, and say so in their logs.
  for (auto& n : cl.nodes)
    BOOST_TEST(n.proc->await_output("lost the head", seconds(2)).has_value(),
               n.proc->output());
  BOOST_TEST(within(2.0, [] {
    return code_of([] { lumen::nodes(); }) == errc::head_unreachable;
  }));
  BOOST_TEST_MESSAGE("head lost: nodes and driver noticed within "
                     << seconds_since(killed_at) << " s");
  BOOST_TEST(seconds_since(killed_at) < 2.5);

  // What needs the head fails at once, saying so: names this process does
  // not hold itself are the head's to look up.
  auto asked_at = steady_clock::now();
  BOOST_TEST((code_of([] { lumen::get_actor<Counter>("someone-else"); }) ==
              errc::head_unreachable));
  BOOST_TEST(seconds_since(asked_at) < 2.0);

  // Work between this driver and live nodes goes on.
  BOOST_TEST(lumen::get(lumen::task(where).on_node(cl.nodes[0].id).remote(),
                        deadline) == cl.nodes[0].id);
  BOOST_TEST(lumen::get(lumen::task(add).spread().remote(1, 2), deadline) == 3);
  BOOST_TEST(lumen::get(keeper.call(&Counter::add, 1), deadline) == 42);
  BOOST_TEST(lumen::get(counter.call(&Counter::add, 5), deadline) == 5);

  // A head restarted at the address has every live node and named actor
  // back within 5 s, under their ids.
  cl.head = cl.start({"--head", "--port", port_of(cl.head.address)});
  auto restarted_at = steady_clock::now();
  BOOST_TEST(within(5.0, [&] {
    try {
      auto alive = ids(lumen::nodes(), true);
      return alive.count(cl.nodes[0].id) && alive.count(cl.nodes[1].id);
    } catch (const lumen::error&) {
      return false; // this driver has not rejoined yet
    }
  }));
  BOOST_TEST_MESSAGE("head restarted: every node back after "
                     << seconds_since(restarted_at) << " s");
  // Another script finds the named actor through the new head.
  auto [code, out] =
    run({SECOND_DRIVER, cl.head.address, cl.token_file, "keeper"}, cl.env());
  BOOST_TEST(seconds_since(restarted_at) < 5.0);
  BOOST_TEST(code == 0, out);
  BOOST_TEST(out.find("node=" + cl.nodes[0].id) != std::string::npos, out);
  BOOST_TEST(out.find("value=47") != std::string::npos, out);
  BOOST_TEST(out.find("clash refused") != std::string::npos, out);
  BOOST_TEST(lumen::get(keeper.call(&Counter::add, 1), deadline) == 48);
  for (auto& n : cl.nodes)
    BOOST_TEST(
      n.proc->await_output("rejoined the head", seconds(5)).has_value());
  // New nodes join the new head, and take work.
  auto newcomer = cl.start({"--address", cl.head.address});
  BOOST_TEST(newcomer.id != cl.nodes[0].id);
  BOOST_TEST(newcomer.id != cl.nodes[1].id);
  BOOST_TEST(lumen::get(lumen::task(where).on_node(newcomer.id).remote(),
                        deadline) == newcomer.id);
  cl.nodes.push_back(std::move(newcomer));
}

BOOST_AUTO_TEST_CASE(work_on_a_paused_head_fails_fast_and_resumes_with_it) {
  auto& cl = *this;
  // Long enough to be running when the head stops, short enough not to
  // hold up its shutdown at the end.
  auto pinned = lumen::task(busy).on_node("head").remote(4000);
  BOOST_TEST(
    !lumen::wait(std::vector{pinned}, 1, milliseconds(300)).pending.empty());
  auto paused_at = steady_clock::now();
  cl.head.proc->signal(SIGSTOP);
  // No socket closes: only the heartbeats tell, and they must.
  BOOST_CHECK_THROW(lumen::get(pinned, deadline), lumen::actor_died);
  BOOST_TEST(seconds_since(paused_at) < 2.5);
  cl.head.proc->signal(SIGCONT);
  // The same head, back: this driver rejoins it and places work there.
  BOOST_TEST(within(10.0, [] {
    try {
      return lumen::get(lumen::task(where).on_node("head").remote(),
                        seconds(2)) == "head";
    } catch (const lumen::error&) {
      return false;
    }
  }));
}

BOOST_AUTO_TEST_CASE(a_node_given_up_for_dead_rejoins_under_a_new_id) {
  auto& cl = *this;
  auto& victim = cl.nodes[1];
  auto old_id = victim.id;
  auto stale = lumen::actor<Counter>(0).on_node(old_id).remote();
  BOOST_TEST(lumen::get(stale.call(&Counter::add, 1), deadline) == 1);
  victim.proc->signal(SIGSTOP);
  // The head itself must have given it up (this driver's own link to it
  // may time out first, and its view marks the node dead sooner).
  BOOST_TEST(within(10.0, [&] { return head_says_dead(cl, old_id); }));
  victim.proc->signal(SIGCONT);
  BOOST_TEST(
    victim.proc->await_output("given up for dead", seconds(15)).has_value(),
    victim.proc->output());
  // It is back under a new id at the same address, and takes new work;
  // its old actor is gone, as its caller was told.
  std::string new_id;
  BOOST_TEST(within(5.0, [&] {
    for (auto& n : lumen::nodes())
      if (n.alive && n.address == victim.address && n.id != old_id)
        new_id = n.id;
    return !new_id.empty();
  }));
  BOOST_REQUIRE(!new_id.empty());
  BOOST_TEST(ids(lumen::nodes(), false).count(old_id) == 1);
  BOOST_TEST(lumen::get(lumen::task(where).on_node(new_id).remote(),
                        deadline) == new_id);
  BOOST_CHECK_THROW(lumen::get(stale.call(&Counter::add, 1), deadline),
                    lumen::actor_died);
  auto [code, out] = cl.status();
  BOOST_TEST(status_of(out, new_id) == "alive", out);
  BOOST_TEST(status_of(out, old_id) == "dead", out);
}

BOOST_AUTO_TEST_CASE(a_node_told_to_exit_does_so_when_given_up_for_dead) {
  auto& cl = *this;
  auto quitter =
    cl.start({"--address", cl.head.address, "--when-given-up", "exit"});
  quitter.proc->signal(SIGSTOP);
  BOOST_TEST(within(10.0, [&] { return head_says_dead(cl, quitter.id); }));
  quitter.proc->signal(SIGCONT);
  BOOST_TEST(quitter.proc->await_output("it exits", seconds(15)).has_value(),
             quitter.proc->output());
  BOOST_TEST(quitter.proc->wait() == 0, quitter.proc->output());
}

BOOST_AUTO_TEST_SUITE_END()
