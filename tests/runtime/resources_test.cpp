#define BOOST_TEST_MODULE resources
#include <boost/test/unit_test.hpp>

// Resources in one process: work that asks for them runs only while they
// are free here, holds them while it runs (an actor, while it lives), and
// an infeasible request is refused at once, naming the resource.
// tests/cluster/resources_procs_test.cpp places work on nodes by them.

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "fixture.hpp"

using namespace std::chrono;

namespace {

// Four task threads, one GPU and two licences: the threads never limit
// what the resources allow.
struct offered : offering {
  offered()
    : offering({{"gpu", 1}, {"licence", 2}}) {}
};

overlap_meter meter;

// Counts how many copies run at once.
int overlap(int x) {
  meter.pass(30);
  return x;
}
LUMEN_REMOTE(overlap);

gate* held = nullptr; // what hold() waits for

int hold(int x) {
  held->wait();
  return x;
}
LUMEN_REMOTE(hold);

int fail(int) {
  throw std::runtime_error("on purpose");
}
LUMEN_REMOTE(fail);

int leaf(int x) {
  return x + 1;
}
LUMEN_REMOTE(leaf);

// Holds all four CPUs and waits for a task that needs one.
int all_cpus_then_nested(int x) {
  auto inner = lumen::task(leaf).with_num_cpus(1).remote(x);
  return lumen::get(inner, deadline);
}
LUMEN_REMOTE(all_cpus_then_nested);

class Trainer {
public:
  int step(int x) {
    return x + 1;
  }
};
LUMEN_ACTOR(Trainer, &Trainer::step);

int most_at_once(const std::map<std::string, double>& ask, int tasks) {
  meter.reset();
  std::vector<lumen::ObjectRef<int>> refs;
  for (int i = 0; i < tasks; ++i)
    refs.push_back(lumen::task(overlap).with_resources(ask).remote(i));
  for (auto& r : refs)
    lumen::get(r, deadline);
  return meter.most;
}

// A task lets its resources go as its run ends, just after its result is
// out: a test that saw the result waits for that.
bool gpu_freed() {
  return eventually([] { return used_here("gpu") == 0.0; });
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(resources, offered)

BOOST_AUTO_TEST_CASE(tasks_run_only_while_their_resources_are_free) {
  BOOST_TEST(most_at_once({{"gpu", 1}}, 6) == 1);
  BOOST_TEST(most_at_once({{"gpu", 0.5}}, 6) == 2);
  BOOST_TEST(most_at_once({{"licence", 1}}, 6) == 2);
  // Without resources, the four threads are the limit.
  BOOST_TEST(most_at_once({}, 8) == 4);
  BOOST_TEST(gpu_freed());
}

BOOST_AUTO_TEST_CASE(the_node_offers_its_cpus_and_what_it_was_given) {
  auto here = lumen::nodes().at(0);
  BOOST_TEST(here.resources.at("cpu") == 4.0);
  BOOST_TEST(here.resources.at("gpu") == 1.0);
  BOOST_TEST(here.resources.at("licence") == 2.0);
  BOOST_TEST(here.used.empty());
}

BOOST_AUTO_TEST_CASE(an_infeasible_request_is_refused_at_once_naming_it) {
  auto e = refusal([] {
    lumen::task(overlap).with_resources({{"gpu", 2}}).remote(1);
  });
  BOOST_TEST((e.code() == lumen::errc::infeasible));
  BOOST_TEST(std::string{e.what()}.find("gpu") != std::string::npos);
  e = refusal([] { lumen::task(overlap).with_num_cpus(5).remote(1); });
  BOOST_TEST(std::string{e.what()}.find("cpu=4 in all") != std::string::npos);
  e = refusal([] {
    lumen::actor<Trainer>().with_resources({{"tpu", 1}}).remote();
  });
  BOOST_TEST((e.code() == lumen::errc::infeasible));
  BOOST_TEST(std::string{e.what()}.find("tpu") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_amounts_are_usage_errors) {
  BOOST_CHECK_THROW(lumen::task(overlap).with_resources({{"gpu", -1}}),
                    lumen::usage_error);
  BOOST_CHECK_THROW(lumen::task(overlap).with_resources({{"gpu", NAN}}),
                    lumen::usage_error);
  BOOST_CHECK_THROW(lumen::task(overlap).with_resources({{"", 1}}),
                    lumen::usage_error);
  BOOST_CHECK_THROW(lumen::actor<Trainer>().with_num_cpus(INFINITY),
                    lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(a_task_gives_its_resources_back_however_it_ends) {
  auto failed = lumen::task(fail).with_resources({{"gpu", 1}}).remote(1);
  BOOST_CHECK_THROW(lumen::get(failed, deadline), lumen::task_error);
  // Cancelled while waiting for the GPU another task holds: it never runs,
  // and what comes after it still does.
  gate g;
  held = &g;
  auto holder = lumen::task(hold).with_resources({{"gpu", 1}}).remote(1);
  auto waiting = lumen::task(hold).with_resources({{"gpu", 1}}).remote(2);
  lumen::cancel(waiting);
  g.open();
  BOOST_TEST(lumen::get(holder, deadline) == 1);
  BOOST_CHECK_THROW(lumen::get(waiting, deadline), lumen::task_cancelled);
  auto after = lumen::task(overlap).with_resources({{"gpu", 1}}).remote(3);
  BOOST_TEST(lumen::get(after, deadline) == 3);
  BOOST_TEST(gpu_freed());
}

BOOST_AUTO_TEST_CASE(a_task_blocked_in_get_lends_its_cpus) {
  // Without the loan the nested task would wait for a CPU forever.
  auto outer = lumen::task(all_cpus_then_nested).with_num_cpus(4).remote(1);
  BOOST_TEST(lumen::get(outer, deadline) == 2);
  BOOST_TEST(eventually([] { return used_here("cpu") == 0.0; }));
}

BOOST_AUTO_TEST_CASE(an_actor_holds_its_resources_until_it_dies) {
  auto a = lumen::actor<Trainer>().with_resources({{"gpu", 1}}).remote();
  BOOST_TEST(lumen::get(a.call(&Trainer::step, 1), deadline) == 2);
  BOOST_TEST(used_here("gpu") == 1.0);
  auto task = lumen::task(overlap).with_resources({{"gpu", 1}}).remote(7);
  BOOST_TEST(
    lumen::wait(std::vector{task}, 1, milliseconds(300)).ready.empty());
  lumen::kill(a);
  BOOST_TEST(lumen::get(task, deadline) == 7);
  BOOST_TEST(gpu_freed());
}

BOOST_AUTO_TEST_CASE(an_actor_is_built_once_its_resources_are_free) {
  gate g;
  held = &g;
  auto holder = lumen::task(hold).with_resources({{"gpu", 1}}).remote(1);
  auto a = lumen::actor<Trainer>().with_resources({{"gpu", 1}}).remote();
  auto call = a.call(&Trainer::step, 41);
  BOOST_TEST(
    lumen::wait(std::vector{call}, 1, milliseconds(300)).ready.empty());
  g.open();
  BOOST_TEST(lumen::get(call, deadline) == 42);
  BOOST_TEST(lumen::get(holder, deadline) == 1);
}

BOOST_AUTO_TEST_CASE(an_actor_dropped_before_it_was_built_frees_its_turn) {
  gate g;
  held = &g;
  auto holder = lumen::task(hold).with_resources({{"gpu", 1}}).remote(1);
  {
    auto never = lumen::actor<Trainer>().with_resources({{"gpu", 1}}).remote();
  }
  g.open();
  BOOST_TEST(lumen::get(holder, deadline) == 1);
  auto after = lumen::task(overlap).with_resources({{"gpu", 1}}).remote(3);
  BOOST_TEST(lumen::get(after, deadline) == 3);
  // The dropped actor was built and ended, or never built: either way the
  // GPU is free once it is gone.
  BOOST_TEST(gpu_freed());
}

BOOST_AUTO_TEST_CASE(resources_come_from_a_flag_too) {
  auto opts = lumen::parse_init_flags({"--resources", "gpu=2,tpu=0.5"});
  BOOST_TEST(opts.resources.at("gpu") == 2.0);
  BOOST_TEST(opts.resources.at("tpu") == 0.5);
  for (auto bad : {"gpu=-1", "gpu=nan", "gpu", "=1", "gpu=1x"})
    BOOST_CHECK_THROW(lumen::parse_init_flags({"--resources", bad}),
                      lumen::usage_error);
}

BOOST_AUTO_TEST_SUITE_END()
