#define BOOST_TEST_MODULE sim_faults
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/sim.hpp>

#include "sim_work.hpp"

// Faults in a simulated cluster: partitions, slowdowns, faults given as
// flags or a file, and chaos drawn from the seed.

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

namespace {

class Where {
public:
  std::string node() const {
    return lumen::this_node_id();
  }
  int echo(int x) const {
    return x;
  }
};
LUMEN_ACTOR(Where, &Where::node, &Where::echo);

/// A simulated run of three nodes on 1 ms links of 1 GB/s, from `opts`;
/// the events' kinds and nodes as "kind node@ms" lines in `seen`.
struct simulated {
  explicit simulated(lumen::init_options opts = {}) {
    opts.sim.enabled = true;
    opts.sim.latency = 1ms;
    opts.sim.bandwidth = 1e9;
    lumen::init(opts);
    lumen::sim::on_event([this](const lumen::sim::event& e) {
      log += lumen::sim::to_json(e) + "\n";
      if (e.kind != "send" && e.kind != "deliver" && e.kind != "start" &&
          e.kind != "finish" && e.kind != "ready")
        seen.push_back(e.kind + " " + e.node + "@" +
                       std::to_string(e.time.count() / 1000000) +
                       (e.what.empty() ? "" : " " + e.what));
    });
  }
  ~simulated() {
    lumen::shutdown();
  }
  bool saw(const std::string& line) const {
    return std::find(seen.begin(), seen.end(), line) != seen.end();
  }
  std::vector<std::string> seen;
  std::string log;
};

bool mentions(const std::exception& e, const std::string& what) {
  return std::string{e.what()}.find(what) != std::string::npos;
}

/// Calls an actor on node-1 across a 300 ms partition of node-1 at a time
/// the jitter moves: every answer comes, none is lost, none twice.
void calls_across_a_short_partition() {
  auto a = lumen::actor<Where>().on_node("node-1").remote();
  lumen::sim::partition({"node-1"}, lumen::sim::now() + 2ms, 300ms);
  std::vector<lumen::ObjectRef<int>> out;
  for (int i = 0; i < 20; ++i) {
    out.push_back(a.call(&Where::echo, i));
    lumen::sleep_for(1ms);
  }
  for (int i = 0; i < 20; ++i)
    if (lumen::get(out[static_cast<size_t>(i)]) != i)
      throw std::runtime_error("call " + std::to_string(i) +
                               " answered another number");
  if (lumen::get(a.call(&Where::node)) != "node-1")
    throw std::runtime_error("a short partition moved the actor");
  if (a.num_restarts() != 0)
    throw std::runtime_error("a short partition restarted the actor");
}

/// An actor with a restart left, on node-2, which dies 1 ms after a call
/// went out: the call answers or fails as lost (the jitter decides which),
/// and once the death is known the actor answers from a live node.
void restarted_elsewhere() {
  auto a =
    lumen::actor<Where>().on_node("node-2").with_max_restarts(1).remote();
  if (lumen::get(a.call(&Where::node)) != "node-2")
    throw std::runtime_error("the actor was not built on node-2");
  auto call = a.call(&Where::echo, 1);
  lumen::sim::kill_node("node-2", lumen::sim::now() + 1ms);
  try {
    if (lumen::get(call) != 1)
      throw std::runtime_error("the call answered another number");
  } catch (const lumen::actor_died&) {
    // Lost with its node: the documented failure.
  }
  lumen::sleep_for(lumen::sim::death_noticed_after + 10ms);
  auto there = lumen::get(a.call(&Where::node));
  if (there == "node-2" || a.num_restarts() != 1)
    throw std::runtime_error("the actor came back on " + there + " after " +
                             std::to_string(a.num_restarts()) + " restarts");
}

/// Spread tasks with a retry each while node-1 dies under them: every
/// one answers, those of node-1 run again on another node.
void retried_elsewhere() {
  std::vector<lumen::ObjectRef<int>> out;
  for (int i = 0; i < 6; ++i)
    out.push_back(lumen::task(nap).spread().with_max_retries(1).remote(20 + i));
  lumen::sim::kill_node("node-1", lumen::sim::now() + 5ms);
  for (int i = 0; i < 6; ++i)
    if (lumen::get(out[static_cast<size_t>(i)]) != 20 + i)
      throw std::runtime_error("task " + std::to_string(i) +
                               " answered another number");
}

lumen::init_options jittery() {
  lumen::init_options opts;
  opts.sim.latency = 1ms;
  opts.sim.bandwidth = 1e9;
  opts.sim.jitter = 1ms;
  return opts;
}

/// Work spread over the nodes while chaos kills, cuts off and slows them:
/// every task either answers its number or fails as the runtime says a
/// task lost with its node fails (actor_died), and the actor, restarted
/// where its node died, keeps answering.
void work_under_chaos() {
  auto a = lumen::actor<Where>().with_max_restarts(1000).spread().remote();
  for (int round = 0; round < 20; ++round) {
    std::vector<lumen::ObjectRef<int>> out;
    for (int i = 0; i < 6; ++i)
      out.push_back(
        lumen::task(nap).spread().with_max_retries(10).remote(100 + i));
    for (int i = 0; i < 6; ++i) {
      try {
        if (lumen::get(out[static_cast<size_t>(i)]) != 100 + i)
          throw std::runtime_error("a task answered another number");
      } catch (const lumen::actor_died&) {
        // Retries used up while nodes were down: the documented failure.
      }
    }
    try {
      if (lumen::get(a.call(&Where::echo, round)) != round)
        throw std::runtime_error("the actor answered another number");
    } catch (const lumen::actor_died&) {
      // The call reached a node that then died; the actor comes back.
    }
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(sim_faults)

BOOST_AUTO_TEST_CASE(a_short_partition_delays_messages_and_loses_nothing) {
  simulated run;
  auto a = lumen::actor<Where>().on_node("node-1").remote();
  BOOST_TEST(lumen::get(a.call(&Where::node)) == "node-1");
  auto start = lumen::sim::now();
  lumen::sim::partition({"node-1"}, start, 500ms);
  lumen::sleep_for(1ms);
  auto answer = a.call(&Where::echo, 7);
  BOOST_TEST(lumen::get(answer) == 7);
  // The call left when the cut healed, then took its two trips.
  auto took = lumen::sim::now() - start;
  BOOST_TEST(ns(took) > ns(502ms));
  BOOST_TEST(ns(took) < ns(503ms));
  BOOST_TEST(a.num_restarts() == 0);
  BOOST_TEST(
    run.saw("partition node-1@" + std::to_string(ns(start) / 1000000)));
  BOOST_TEST(
    run.saw("heal node-1@" + std::to_string(ns(start + 500ms) / 1000000)));
  BOOST_TEST(lumen::nodes()[1].alive);
}

BOOST_AUTO_TEST_CASE(a_long_partition_fences_the_far_side_until_it_heals) {
  simulated run;
  auto a =
    lumen::actor<Where>().on_node("node-1").with_max_restarts(1).remote();
  BOOST_TEST(lumen::get(a.call(&Where::node)) == "node-1");
  auto pinned = lumen::task(nap).on_node("node-1").remote(5000);
  lumen::sim::partition({"node-1"}, 1s, 3s);
  try {
    lumen::get(pinned);
    BOOST_ERROR("a task on a fenced node answered");
  } catch (const lumen::actor_died& e) {
    // Cut at 1 s; the head gave up on it after the detector's time.
    BOOST_TEST(ns(lumen::sim::now()) ==
               ns(1s + lumen::sim::death_noticed_after));
    BOOST_TEST(mentions(e, "partition"), e.what());
  }
  BOOST_TEST(run.saw("kill node-1@2000 partition"));
  BOOST_TEST(lumen::get(a.call(&Where::node)) == "node-2"); // built again
  BOOST_TEST(a.num_restarts() == 1);
  BOOST_TEST(!lumen::nodes()[1].alive);
  // Healed at 4 s, it is back, empty, and takes work.
  lumen::sleep_for(4s - lumen::sim::now() + 1ms);
  BOOST_TEST(lumen::nodes()[1].alive);
  BOOST_TEST(run.saw("restart node-1@4000"));
  BOOST_TEST(lumen::get(lumen::task(square).on_node("node-1").remote(4)) == 16);
}

BOOST_AUTO_TEST_CASE(a_partition_of_the_script_side_cuts_off_the_rest) {
  simulated run;
  lumen::sim::partition({"node-0", "node-1"}, 0ns, 2s);
  auto cut_off = lumen::task(nap).on_node("node-2").remote(10);
  BOOST_CHECK_THROW(lumen::get(cut_off), lumen::actor_died);
  // node-1 is on the script's side: it works on.
  BOOST_TEST(lumen::get(lumen::task(square).on_node("node-1").remote(3)) == 9);
  BOOST_CHECK_THROW(lumen::sim::partition({}, 0ns, 1s), lumen::usage_error);
  BOOST_CHECK_THROW(
    lumen::sim::partition({"node-0", "node-1", "node-2"}, 0ns, 1s),
    lumen::usage_error);
  BOOST_CHECK_THROW(lumen::sim::partition({"node-7"}, 0ns, 1s),
                    lumen::usage_error);
  BOOST_CHECK_THROW(lumen::sim::partition({"node-1"}, 0ns, 0s),
                    lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(a_partition_heals_for_every_seed) {
  every_seed_passes(1, 100, calls_across_a_short_partition, jittery());
}

BOOST_AUTO_TEST_CASE(a_killed_actor_restarts_elsewhere_for_every_seed) {
  every_seed_passes(1, 100, restarted_elsewhere, jittery());
}

BOOST_AUTO_TEST_CASE(a_task_with_a_retry_reruns_elsewhere_for_every_seed) {
  every_seed_passes(1, 100, retried_elsewhere, jittery());
}

BOOST_AUTO_TEST_CASE(a_node_slowed_at_a_time_takes_its_factor_then_recovers) {
  simulated run;
  lumen::sim::slow_node("node-2", 3, 1s, 10s);
  lumen::get(lumen::task(busy).on_node("node-2").remote(0.5)); // before
  auto wire = lumen::sim::now() - 500ms;
  lumen::sleep_for(1s - lumen::sim::now());
  auto start = lumen::sim::now();
  lumen::get(lumen::task(busy).on_node("node-2").remote(0.5));
  BOOST_TEST(ns(lumen::sim::now() - start) == ns(1500ms + wire));
  lumen::sleep_for(11s - lumen::sim::now());
  start = lumen::sim::now();
  lumen::get(lumen::task(busy).on_node("node-2").remote(0.5));
  BOOST_TEST(ns(lumen::sim::now() - start) == ns(500ms + wire));
  BOOST_TEST(run.saw("slow node-2@1000 3"));
  BOOST_TEST(run.saw("slow node-2@11000 1"));
  BOOST_CHECK_THROW(lumen::sim::slow_node("node-2", 0, 0ns),
                    lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(faults_given_as_flags_and_a_file_happen_on_time) {
  auto file = std::filesystem::temp_directory_path() /
              ("lumen-faults-" + std::to_string(::getpid()) + ".json");
  std::ofstream{file} << R"([
    {"at": "3s", "partition": ["node-2"], "for": 0.5},
    {"at": 2, "slow": "node-1", "factor": 4, "for": "1s"}
  ])";
  auto opts = lumen::parse_init_flags(
    {"--simulate=3", "--sim-fault=at=1s,kill=node-1",
     "--sim-fault=at=1500ms,restart=node-1", "--sim-faults=" + file.string()});
  BOOST_TEST(opts.sim.faults.size() == 2u);
  {
    simulated run{opts};
    lumen::sleep_for(5s);
    BOOST_TEST(run.saw("kill node-1@1000"));
    BOOST_TEST(run.saw("restart node-1@1500"));
    BOOST_TEST(run.saw("slow node-1@2000 4"));
    BOOST_TEST(run.saw("slow node-1@3000 1"));
    BOOST_TEST(run.saw("partition node-2@3000"));
    BOOST_TEST(run.saw("heal node-2@3500"));
    BOOST_TEST(lumen::nodes()[1].alive);
  }
  std::ofstream{file} << R"({"at": "1s"})";
  opts.sim.faults.clear();
  try {
    simulated run{opts};
    BOOST_ERROR("a file of faults that is no array was taken");
  } catch (const lumen::usage_error& e) {
    BOOST_TEST(mentions(e, "give an array of faults"), e.what());
  }
  std::filesystem::remove(file);
}

BOOST_AUTO_TEST_CASE(bad_faults_say_what_is_wrong) {
  auto refused = [](std::vector<std::string> flags, const std::string& why) {
    try {
      auto opts = lumen::parse_init_flags(flags);
      simulated run{opts};
      BOOST_ERROR("refused nothing: " << flags.back());
    } catch (const lumen::usage_error& e) {
      BOOST_TEST(mentions(e, why), e.what());
    }
  };
  refused({"--sim-fault=at=1s,kil=node-1"}, "unknown key 'kil'");
  refused({"--sim-fault=at=1s"}, "name one fault");
  refused({"--sim-fault=at=1s,partition=node-1"}, "for=2s");
  refused({"--sim-fault=at=1s,slow=node-1"}, "factor=3");
  refused({"--sim-fault=at=soon,kill=node-1"}, "is not a time");
  refused({"--sim-fault=kill=node-0"}, "node-0 is where the script");
  refused({"--simulate", "--sim-fault=kill=node-9"}, "not a simulated node");
  refused({"--sim-chaos=kill=-1"}, "not a positive number");
  refused({"--sim-chaos=melt=1"}, "unknown kind 'melt'");
  refused({"--simulate", "--sim-nodes=1", "--sim-chaos=kill=1"},
          "a node besides node-0");
}

BOOST_AUTO_TEST_CASE(chaos_from_the_seed_faults_the_run_the_same_way_twice) {
  auto opts = jittery();
  opts.sim.nodes = 4;
  opts.sim.seed = 11;
  opts.sim.chaos = "kill=0.5,partition=0.5,slow=0.5";
  std::string first;
  std::vector<std::string> faults;
  {
    simulated run{opts};
    work_under_chaos();
    first = run.log;
    faults = run.seen;
  }
  size_t kills = 0, partitions = 0, slows = 0;
  for (auto& f : faults) {
    kills += f.rfind("kill ", 0) == 0 ? 1 : 0;
    partitions += f.rfind("partition ", 0) == 0 ? 1 : 0;
    slows += f.rfind("slow ", 0) == 0 ? 1 : 0;
  }
  BOOST_TEST(kills > 0u);
  BOOST_TEST(partitions > 0u);
  BOOST_TEST(slows > 0u);
  simulated again{opts};
  work_under_chaos();
  BOOST_TEST(again.log == first); // the same faults at the same events
}

BOOST_AUTO_TEST_CASE(work_survives_chaos_for_every_seed) {
  auto opts = jittery();
  opts.sim.nodes = 4;
  opts.sim.chaos = "kill=0.5,partition=0.5,slow=0.5";
  every_seed_passes(1, 30, work_under_chaos, opts);
}

BOOST_AUTO_TEST_SUITE_END()
