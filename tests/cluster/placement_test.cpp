#define BOOST_TEST_MODULE placement
#include <boost/test/unit_test.hpp>

// Where work runs: placement on nodes, spread, refs across nodes, remote
// errors, actors and typed actors on nodes, named actors across scripts.
// How typed messages' large blocks travel: placement_blocks.cpp, in the
// same suite.

#include <algorithm>
#include <string>
#include <vector>

#include <lumen/caf_interop.hpp>

#include "cluster_fixture.hpp"
#include "cluster_job.hpp"

using namespace lumen::test;

BOOST_TEST_GLOBAL_FIXTURE(cluster_fixture);

BOOST_AUTO_TEST_SUITE(placement)

BOOST_AUTO_TEST_CASE(nodes_lists_the_head_and_both_nodes_alive) {
  auto ns = lumen::nodes();
  BOOST_TEST(
    (ids(ns, true) == std::set<std::string>{"head", "node-1", "node-2"}));
  BOOST_TEST(lumen::this_node_id().rfind("driver-", 0) == 0);
}

BOOST_AUTO_TEST_CASE(tasks_run_on_the_node_they_are_placed_on) {
  for (auto id : {"head", "node-1", "node-2"})
    BOOST_TEST(lumen::get(lumen::task(where).on_node(id).remote(), deadline) ==
               id);
  BOOST_TEST(lumen::get(lumen::task(where).remote()) == lumen::this_node_id());
}

BOOST_AUTO_TEST_CASE(spread_tasks_reach_every_live_node) {
  std::vector<lumen::ObjectRef<std::string>> refs;
  for (int i = 0; i < 30; ++i)
    refs.push_back(lumen::task(where).spread().remote());
  auto places = lumen::get(refs, deadline);
  std::set<std::string> seen(places.begin(), places.end());
  BOOST_TEST((seen == std::set<std::string>{"head", "node-1", "node-2"}));
}

BOOST_AUTO_TEST_CASE(object_refs_cross_nodes) {
  auto a = lumen::task(add).on_node("node-1").remote(1, 2);
  auto b = lumen::task(add).on_node("node-2").remote(a, 10);
  BOOST_TEST(lumen::get(b, deadline) == 13);
  auto big = lumen::put(std::vector<float>(1 << 20, 0.5f));
  BOOST_TEST(lumen::get(lumen::task(sum).on_node("node-2").remote(big),
                        deadline) == 524288.0);
}

BOOST_AUTO_TEST_CASE(work_on_a_node_sends_its_own_refs_to_another_node) {
  BOOST_TEST(
    lumen::get(lumen::task(relay).on_node("node-1").remote("node-2", 1000),
               deadline) == 1000.0);
  BOOST_TEST(lumen::get(lumen::task(relay).on_node("head").remote("node-1", 10),
                        deadline) == 10.0);
}

BOOST_AUTO_TEST_CASE(remote_exceptions_carry_type_message_and_node) {
  try {
    lumen::get(lumen::task(fails).on_node("node-1").remote(5), deadline);
    BOOST_FAIL("get did not throw");
  } catch (const lumen::task_error& e) {
    BOOST_TEST(e.function() == "fails");
    BOOST_TEST(e.exception_type() == "std::invalid_argument");
    BOOST_TEST(e.message() == "bad input 5");
    BOOST_TEST(e.node() == "node-1");
  }
}

BOOST_AUTO_TEST_CASE(an_unknown_node_is_a_usage_error) {
  BOOST_CHECK_EXCEPTION(
    lumen::get(lumen::task(where).on_node("node-99").remote(), deadline),
    lumen::usage_error, [](const lumen::usage_error& e) {
      return std::string{e.what()}.find("node-99") != std::string::npos;
    });
}

BOOST_AUTO_TEST_CASE(actors_live_on_their_node_and_keep_call_order) {
  auto c = lumen::actor<Counter>(0).on_node("node-2").remote();
  BOOST_TEST(lumen::get(c.call(&Counter::node), deadline) == "node-2");
  std::vector<lumen::ObjectRef<int>> refs;
  for (int i = 0; i < 2000; ++i)
    refs.push_back(c.call(&Counter::add, 1));
  auto values = lumen::get(refs, deadline);
  for (int i = 0; i < 2000; ++i)
    BOOST_TEST_REQUIRE(values[i] == i + 1);
  // A ref argument produced on another node holds back later calls.
  auto slow = lumen::task(busy).on_node("node-1").remote(200);
  auto first = c.call(&Counter::add, slow);
  auto second = c.call(&Counter::add, 1);
  BOOST_TEST(lumen::get(first, deadline) == 2200);
  BOOST_TEST(lumen::get(second, deadline) == 2201);
}

BOOST_AUTO_TEST_CASE(remote_actors_know_the_id_their_handles_show) {
  auto c = lumen::actor<Counter>(0).on_node("node-1").remote();
  auto d = lumen::actor<Counter>(0).on_node("node-2").remote();
  BOOST_TEST(lumen::get(c.call(&Counter::self_id), deadline) == c.id());
  BOOST_TEST(lumen::get(d.call(&Counter::self_id), deadline) == d.id());
  BOOST_TEST(c.id() != d.id());
}

BOOST_AUTO_TEST_CASE(the_key_value_store_is_one_for_the_whole_cluster) {
  auto read_on = [](const std::string& node, const std::string& key) {
    return lumen::get(lumen::task(kv_read).on_node(node).remote(key), deadline);
  };
  auto claim_on = [](const std::string& node, const std::string& key) {
    return lumen::get(lumen::task(kv_claim).on_node(node).remote(key, node),
                      deadline);
  };
  BOOST_TEST(lumen::kv::put("test/owner", "driver"));
  BOOST_TEST(read_on("node-1", "test/owner") == "driver");
  BOOST_TEST(!claim_on("node-2", "test/owner"));
  BOOST_TEST(claim_on("node-2", "test/claimed"));
  BOOST_TEST(lumen::kv::get("test/claimed").value_or("") == "node-2");
  // The head lists what every process left.
  auto listed = lumen::kv::keys("test/");
  BOOST_TEST(listed == (std::vector<std::string>{"test/claimed", "test/owner"}),
             boost::test_tools::per_element());
  BOOST_TEST(lumen::kv::erase("test/claimed"));
  BOOST_TEST(read_on("node-1", "test/claimed") == "<none>");
  BOOST_TEST(lumen::kv::erase("test/owner"));
  // The head's bound on the whole store comes back as the same error.
  std::string mib(1 << 20, 'x'), refusal;
  int stored = 0;
  for (; stored < 70 && refusal.empty(); ++stored)
    try {
      lumen::kv::put("fill/" + std::to_string(stored), mib);
    } catch (const lumen::usage_error& e) {
      refusal = e.what();
    }
  BOOST_TEST(refusal.find("full (64 MiB)") != std::string::npos, refusal);
  for (int i = 0; i < stored; ++i)
    lumen::kv::erase("fill/" + std::to_string(i));
  BOOST_TEST(lumen::kv::put("test/after", "room again"));
  lumen::kv::erase("test/after");
}

BOOST_AUTO_TEST_CASE(a_remote_method_that_throws_fails_only_that_call) {
  auto c = lumen::actor<Counter>(5).on_node("node-1").remote();
  BOOST_CHECK_EXCEPTION(lumen::get(c.call(&Counter::fail), deadline),
                        lumen::task_error, [](const lumen::task_error& e) {
                          return e.function() == "Counter::fail" &&
                                 e.node() == "node-1" &&
                                 e.message() == "counter overflow";
                        });
  BOOST_TEST(lumen::get(c.call(&Counter::add, 1), deadline) == 6);
}

BOOST_AUTO_TEST_CASE(named_actors_are_found_by_other_scripts) {
  auto& cl = *the_cluster;
  auto shared =
    lumen::actor<Counter>(100).on_node("node-1").with_name("shared").remote();
  BOOST_TEST(lumen::get(shared.call(&Counter::add, 0), deadline) == 100);
  auto [code, out] =
    lumen::test::run({SECOND_DRIVER, cl.head.address, cl.token_file}, cl.env());
  BOOST_TEST(code == 0, out);
  BOOST_TEST(out.find("node=node-1") != std::string::npos, out);
  BOOST_TEST(out.find("value=105") != std::string::npos, out);
  BOOST_TEST(out.find("clash refused") != std::string::npos, out);
  BOOST_TEST(out.find("already exists") != std::string::npos, out);
  BOOST_TEST(out.find("nobody missing") != std::string::npos, out);
  // The other script's shutdown left the actor alone.
  BOOST_TEST(lumen::get(shared.call(&Counter::add, 1), deadline) == 106);
  auto status =
    lumen::test::run({LUMEN_CLI, "status", "--address", cl.head.address,
                      "--token-file", cl.token_file},
                     cl.env());
  auto row = lumen::test::status_row(status.second, "node-1");
  BOOST_REQUIRE(row.size() > 4);
  BOOST_TEST(std::stoi(row[4]) >= 1, status.second);
  lumen::kill(shared);
  // A script that returns without lumen::shutdown() exits as it said, the
  // runtime ended for it (it once crashed at exit).
  auto [forgot, said] = lumen::test::run(
    {SECOND_DRIVER, cl.head.address, cl.token_file, "nobody-here"}, cl.env());
  BOOST_TEST(forgot == 1, said);
  BOOST_TEST(said.find("nobody-here: missing") != std::string::npos, said);
}

BOOST_AUTO_TEST_CASE(a_detached_actor_outlives_the_script_that_made_it) {
  auto& cl = *the_cluster;
  auto [code, out] = lumen::test::run(
    {SECOND_DRIVER, cl.head.address, cl.token_file, "lasting", "make-detached"},
    cl.env());
  BOOST_TEST(code == 0, out);
  // Placed on a node (the head is one), not in the script, gone now.
  BOOST_TEST((out.find("made on node-") != std::string::npos ||
              out.find("made on head") != std::string::npos),
             out);
  auto kept = lumen::get_actor<Counter>("lasting");
  BOOST_REQUIRE(kept.has_value());
  BOOST_TEST(lumen::get(kept->call(&Counter::add, 1), deadline) == 8);
  lumen::kill(*kept);
  BOOST_TEST(lumen::test::eventually(
    [] { return !lumen::get_actor<Counter>("lasting"); }, milliseconds(50)));
  // An owned one (the default) ends with its script.
  std::tie(code, out) = lumen::test::run(
    {SECOND_DRIVER, cl.head.address, cl.token_file, "fleeting", "make-owned"},
    cl.env());
  BOOST_TEST(code == 0, out);
  BOOST_TEST(lumen::test::eventually(
    [] { return !lumen::get_actor<Counter>("fleeting"); }, milliseconds(50)));
}

BOOST_AUTO_TEST_CASE(a_threaded_actor_on_a_node_runs_calls_at_once) {
  auto a =
    lumen::actor<Counter>(0).on_node("node-2").with_max_concurrency(2).remote();
  std::vector<lumen::ObjectRef<std::vector<int64_t>>> refs;
  for (int i = 0; i < 4; ++i)
    refs.push_back(a.call(&Counter::nap_span, 200));
  std::vector<std::vector<int64_t>> spans;
  for (auto& r : refs)
    spans.push_back(lumen::get(r, deadline));
  // Each span overlaps exactly one other (two run at once, never three).
  std::sort(spans.begin(), spans.end());
  int most = 0;
  for (auto& s : spans) {
    int at_once = 0;
    for (auto& t : spans)
      at_once += t[0] <= s[0] && s[0] < t[1] ? 1 : 0;
    most = std::max(most, at_once);
  }
  BOOST_TEST(most == 2);
}

// An embedded cluster of processes: the script is their head, each node
// this program run again, ended with it.
BOOST_AUTO_TEST_CASE(local_nodes_are_processes_of_their_own) {
  auto [code, out] = lumen::test::run({LOCAL_NODES_JOB, "--local-nodes", "2"});
  BOOST_TEST(code == 0, out);
  auto once = out.find("main began");
  BOOST_TEST((once != std::string::npos &&
              out.find("main began", once + 1) == std::string::npos),
             out);
  BOOST_TEST(out.find("nodes=2") != std::string::npos, out);
  BOOST_TEST(out.find("node-1 in a process of its own") != std::string::npos,
             out);
  BOOST_TEST(out.find("node-2 in a process of its own") != std::string::npos,
             out);
  BOOST_TEST(out.find("counter on node-2 counts 6") != std::string::npos, out);
  BOOST_TEST(out.find("node-1 killed: its work failed") != std::string::npos,
             out);
  BOOST_TEST(out.find("counter counts 7") != std::string::npos, out);
  BOOST_TEST(out.find("after shutdown 2 of 2 node processes gone") !=
               std::string::npos,
             out);
}

BOOST_AUTO_TEST_CASE(typed_actors_spawn_on_other_nodes_by_name) {
  auto calc = lumen::spawn_on<calculator>("node-2", "calculator");
  BOOST_CHECK(calc->node() != lumen::system().node());
  BOOST_TEST(lumen::get(lumen::call(calc, add_atom::value, 2, 3), deadline) ==
             5);
  auto here = lumen::spawn_on<calculator>(lumen::this_node_id(), "calculator");
  BOOST_TEST(lumen::get(lumen::call(here, add_atom::value, 1, 1), deadline) ==
             2);
  BOOST_CHECK_EXCEPTION(lumen::spawn_on<calculator>("node-1", "no-such-actor"),
                        lumen::usage_error, [](const lumen::usage_error& e) {
                          return std::string{e.what()}.find(
                                   "LUMEN_TYPED_ACTOR") != std::string::npos;
                        });
  BOOST_CHECK_THROW(lumen::spawn_on<calculator>("node-99", "calculator"),
                    lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(typed_requests_in_flight_by_thousands_keep_their_order) {
  auto t = lumen::spawn_on<tally>("node-1", "tally");
  std::vector<lumen::ObjectRef<int64_t>> sums;
  for (int32_t i = 0; i < 3000; ++i)
    sums.push_back(lumen::call(t, add_atom::value, i));
  int64_t expected = 0;
  for (int32_t i = 0; i < 3000; ++i) {
    expected += i;
    BOOST_REQUIRE_EQUAL(lumen::get(sums[i], deadline), expected);
  }
}

BOOST_AUTO_TEST_CASE(typed_requests_carrying_handles_and_from_actors_work) {
  // A handle in the request sends it through CAF; the relay on node-2
  // then asks node-1's calculator itself, from inside an actor.
  auto calc = lumen::spawn_on<calculator>("node-1", "calculator");
  auto r = lumen::spawn_on<relay_actor>("node-2", "relay");
  BOOST_TEST(
    lumen::get(lumen::call(r, add_atom::value, calc, 20, 22), deadline) == 42);
  auto gone = lumen::spawn_on<calculator>("node-1", "calculator");
  caf::anon_send_exit(gone, caf::exit_reason::kill);
  // The exit goes through CAF, the calls on the data plane: no order
  // between them, so wait for the calculator to be gone.
  auto until = steady_clock::now() + seconds(10);
  bool died = false;
  while (!died && steady_clock::now() < until) {
    try {
      lumen::get(lumen::call(gone, add_atom::value, 1, 1), deadline);
    } catch (const lumen::actor_died&) {
      died = true;
    }
  }
  BOOST_REQUIRE(died);
  BOOST_CHECK_THROW(
    lumen::get(lumen::call(r, add_atom::value, gone, 1, 1), deadline),
    lumen::actor_died);
}

BOOST_AUTO_TEST_CASE(killed_remote_actors_fail_later_calls) {
  auto c = lumen::actor<Counter>(0).on_node("node-1").remote();
  BOOST_TEST(lumen::get(c.call(&Counter::add, 1), deadline) == 1);
  lumen::kill(c);
  BOOST_CHECK_THROW(lumen::get(c.call(&Counter::add, 1), deadline),
                    lumen::actor_died);
}

BOOST_AUTO_TEST_SUITE_END()
