#define BOOST_TEST_MODULE sim_typed
#include <boost/test/unit_test.hpp>

// Typed CAF actors in a simulated cluster: spawned on a node, called from
// the script and from each other across the simulated links in exactly
// their time, their compute charged to their node, CAF's timers on the
// virtual clock, a node's death failing what was asked of it, and the
// same seed giving the same run.

#include <chrono>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/lumen.hpp>
#include <lumen/sim.hpp>

#include "sim_work.hpp"

using namespace std::chrono_literals;

namespace {

using add_atom = caf::atom_constant<caf::atom("add")>;
using div_atom = caf::atom_constant<caf::atom("div")>;
using where_atom = caf::atom_constant<caf::atom("where")>;
using work_atom = caf::atom_constant<caf::atom("work")>;
using later_atom = caf::atom_constant<caf::atom("later")>;
using ask_atom = caf::atom_constant<caf::atom("ask")>;

using calculator = caf::typed_actor<
  caf::replies_to<add_atom, int32_t, int32_t>::with<int32_t>,
  caf::replies_to<div_atom, int32_t, int32_t>::with<int32_t>,
  caf::replies_to<where_atom>::with<std::string>,
  // Charges `ms` of compute, then answers the node it ran on.
  caf::replies_to<work_atom, int32_t>::with<std::string>,
  // Answers `x` after `ms` of virtual time, from a CAF timer.
  caf::replies_to<later_atom, int32_t, int32_t>::with<int32_t>>;

calculator::behavior_type calculator_impl(calculator::pointer self) {
  return {
    [](add_atom, int32_t x, int32_t y) -> int32_t { return x + y; },
    [](div_atom, int32_t x, int32_t y) -> caf::result<int32_t> {
      if (y == 0)
        return caf::make_error(caf::sec::invalid_argument, "division by zero");
      return x / y;
    },
    [](where_atom) { return lumen::this_node_id(); },
    [](work_atom, int32_t ms) {
      lumen::sim::charge(std::chrono::milliseconds(ms));
      return lumen::this_node_id();
    },
    [self](later_atom, int32_t x, int32_t ms) {
      // A helper's CAF timer answers.
      auto rp = self->make_response_promise<int32_t>();
      self->spawn([rp, x, ms](caf::event_based_actor* timer) mutable {
        timer->delayed_send(timer, std::chrono::milliseconds(ms),
                            caf::ok_atom::value);
        return caf::behavior{[timer, rp, x](caf::ok_atom) mutable {
          rp.deliver(x);
          timer->quit();
        }};
      });
      return rp;
    },
  };
}
LUMEN_TYPED_ACTOR("test.sim_calculator", calculator_impl);

/// Asks a calculator elsewhere on its callers' behalf.
using forwarder = caf::typed_actor<
  caf::replies_to<ask_atom, calculator, int32_t>::with<int32_t>>;

forwarder::behavior_type forwarder_impl(forwarder::pointer self) {
  return {
    [self](ask_atom, calculator calc, int32_t x) {
      auto rp = self->make_response_promise<int32_t>();
      lumen::request(self, calc, caf::infinite, add_atom::value, x, x)
        .then([rp](int32_t y) mutable { rp.deliver(y); },
              [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
      return rp;
    },
  };
}
LUMEN_TYPED_ACTOR("test.sim_forwarder", forwarder_impl);

/// Three nodes on 1 ms links of 1 GB/s.
lumen::init_options three_nodes(uint64_t seed = 1) {
  lumen::init_options opts;
  opts.sim.enabled = true;
  opts.sim.seed = seed;
  opts.sim.nodes = 3;
  opts.sim.latency = 1ms;
  opts.sim.bandwidth = 1e9;
  return opts;
}

/// Checks that what began at `start` took `want` of virtual time, and
/// under `slack` more: what the messages' few dozen bytes add.
void took(std::chrono::nanoseconds start, std::chrono::nanoseconds want,
          std::chrono::nanoseconds slack = 10us) {
  auto t = ns(lumen::sim::now() - start);
  BOOST_TEST(t >= ns(want));
  BOOST_TEST(t < ns(want + slack));
}

struct simulated {
  explicit simulated(lumen::init_options opts = three_nodes()) {
    lumen::init(opts);
  }
  ~simulated() {
    lumen::shutdown();
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(a_call_crosses_the_link_both_ways) {
  simulated run;
  auto calc = lumen::spawn_on<calculator>("node-2", "test.sim_calculator");
  BOOST_TEST(lumen::get(lumen::call(calc, where_atom::value)) == "node-2");
  auto start = lumen::sim::now();
  BOOST_TEST(lumen::get(lumen::call(calc, add_atom::value, 2, 3)) == 5);
  // Two 1 ms latencies and a few dozen bytes at 1 GB/s.
  took(start, 2ms, 1us);
}

BOOST_AUTO_TEST_CASE(a_handler_charges_its_nodes_compute) {
  auto opts = three_nodes();
  opts.sim.slow = {{"node-1", 3.0}};
  simulated run{opts};
  auto slow = lumen::spawn_on<calculator>("node-1", "test.sim_calculator");
  auto fast = lumen::spawn_on<calculator>("node-2", "test.sim_calculator");
  auto start = lumen::sim::now();
  auto a = lumen::call(slow, work_atom::value, 10);
  auto b = lumen::call(fast, work_atom::value, 10);
  BOOST_TEST(lumen::get(b) == "node-2");
  took(start, 12ms);
  BOOST_TEST(lumen::get(a) == "node-1");
  took(start, 32ms);
}

BOOST_AUTO_TEST_CASE(an_actors_own_request_crosses_the_links) {
  simulated run;
  auto calc = lumen::spawn_on<calculator>("node-2", "test.sim_calculator");
  auto fwd = lumen::spawn_on<forwarder>("node-1", "test.sim_forwarder");
  auto start = lumen::sim::now();
  BOOST_TEST(lumen::get(lumen::call(fwd, ask_atom::value, calc, 21)) == 42);
  // node-0 to node-1 and back, node-1 to node-2 and back.
  took(start, 4ms);
}

BOOST_AUTO_TEST_CASE(cafs_timers_go_by_the_virtual_clock) {
  simulated run;
  auto calc = lumen::spawn_on<calculator>("node-1", "test.sim_calculator");
  auto start = lumen::sim::now();
  BOOST_TEST(lumen::get(lumen::call(calc, later_atom::value, 7, 5000)) == 7);
  took(start, 5002ms);
}

BOOST_AUTO_TEST_CASE(an_error_names_the_actors_simulated_node) {
  simulated run;
  auto calc = lumen::spawn_on<calculator>("node-1", "test.sim_calculator");
  try {
    lumen::get(lumen::call(calc, div_atom::value, 1, 0));
    BOOST_FAIL("get did not throw");
  } catch (const lumen::typed_actor_error& e) {
    BOOST_TEST(e.node() == "node-1");
    BOOST_CHECK(e.cause() == caf::sec::invalid_argument);
  }
}

BOOST_AUTO_TEST_CASE(a_killed_node_fails_the_calls_that_reached_it) {
  simulated run;
  auto calc = lumen::spawn_on<calculator>("node-2", "test.sim_calculator");
  auto start = lumen::sim::now();
  auto busy = lumen::call(calc, work_atom::value, 5000);
  lumen::sim::kill_node("node-2", start + 1s);
  BOOST_CHECK_THROW(lumen::get(busy), lumen::actor_died);
  BOOST_TEST(ns(lumen::sim::now() - start) == ns(1s));
  // After it: refused at once, as a connection to a dead process is.
  BOOST_CHECK_THROW(lumen::get(lumen::call(calc, add_atom::value, 1, 1)),
                    lumen::actor_died);
  BOOST_CHECK_THROW(
    lumen::spawn_on<calculator>("node-2", "test.sim_calculator"),
    lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(bad_spawns_say_what_is_wrong) {
  simulated run;
  BOOST_CHECK_EXCEPTION(
    lumen::spawn_on<calculator>("node-9", "test.sim_calculator"),
    lumen::usage_error, [](const lumen::usage_error& e) {
      return std::string{e.what()}.find("node-0 to node-2") !=
             std::string::npos;
    });
  BOOST_CHECK_EXCEPTION(lumen::spawn_on<calculator>("node-1", "no.such.actor"),
                        lumen::usage_error, [](const lumen::usage_error& e) {
                          return std::string{e.what()}.find("no.such.actor") !=
                                 std::string::npos;
                        });
}

namespace {

/// Calls from three places at once in an order the seed picks; the log of
/// the run.
std::string a_busy_run(uint64_t seed) {
  std::string log;
  {
    simulated run{three_nodes(seed)};
    lumen::sim::on_event([&log](const lumen::sim::event& e) {
      log += lumen::sim::to_json(e) + "\n";
    });
    auto calc = lumen::spawn_on<calculator>("node-2", "test.sim_calculator");
    auto fwd = lumen::spawn_on<forwarder>("node-1", "test.sim_forwarder");
    std::vector<lumen::ObjectRef<int32_t>> out;
    for (int32_t i = 0; i < 20; ++i) {
      out.push_back(lumen::call(calc, add_atom::value, i, 1));
      out.push_back(lumen::call(fwd, ask_atom::value, calc, i));
    }
    for (int32_t i = 0; i < 20; ++i) {
      BOOST_TEST(lumen::get(out[2 * static_cast<size_t>(i)]) == i + 1);
      BOOST_TEST(lumen::get(out[2 * static_cast<size_t>(i) + 1]) == 2 * i);
    }
  }
  return log;
}

} // namespace

BOOST_AUTO_TEST_CASE(the_same_seed_gives_the_same_run) {
  auto first = a_busy_run(5);
  BOOST_TEST(first.size() > 1000u);
  BOOST_TEST(first == a_busy_run(5));
}
