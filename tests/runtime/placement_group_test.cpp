#define BOOST_TEST_MODULE placement_group
#include <boost/test/unit_test.hpp>

// Placement groups in one process: bundles reserve the process's resources
// and only work placed in them uses those; ready() waits until they are
// free; removing a group ends its actors and tasks and gives the resources
// back. tests/cluster/placement_procs_test.cpp lays bundles over nodes.

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fixture.hpp"

using namespace std::chrono;

namespace {

// Four task threads and two GPUs.
struct offered : offering {
  offered()
    : offering({{"gpu", 2}}) {}
};

overlap_meter meter;

// Counts how many copies run at once.
int overlap(int x) {
  meter.pass(30);
  return x;
}
LUMEN_REMOTE(overlap);

std::atomic<bool> looping{false};

// Runs until it is cancelled; returns how it ended.
int until_cancelled(int) {
  looping = true;
  while (!lumen::cancelled())
    std::this_thread::sleep_for(milliseconds(1));
  return -1;
}
LUMEN_REMOTE(until_cancelled);

class Worker {
public:
  int step(int x) {
    return x + 1;
  }
};
LUMEN_ACTOR(Worker, &Worker::step);

bool says(const std::exception& e, const std::string& part) {
  return std::string{e.what()}.find(part) != std::string::npos;
}

using lumen::placement_strategy;

} // namespace

BOOST_FIXTURE_TEST_SUITE(placement_groups, offered)

BOOST_AUTO_TEST_CASE(a_bundle_reserves_resources_for_the_work_placed_in_it) {
  lumen::placement_group pg({{{"gpu", 1}}});
  lumen::get(pg.ready(), deadline);
  BOOST_TEST(pg.bundle_node(0) == lumen::this_node_id());
  // The reserve counts as used; its own resource is offered in its name.
  BOOST_TEST(used_here("gpu") == 1.0);
  auto here = lumen::nodes().at(0);
  BOOST_TEST(here.resources.at("gpu_group_0_" + pg.id()) == 1.0);
  // Work in the bundle shares its one GPU: one task at a time.
  meter.reset();
  std::vector<lumen::ObjectRef<int>> in;
  for (int i = 0; i < 4; ++i)
    in.push_back(lumen::task(overlap)
                   .with_resources({{"gpu", 1}})
                   .in_placement_group(pg, 0)
                   .remote(i));
  for (int i = 0; i < 4; ++i)
    BOOST_TEST(lumen::get(in[i], deadline) == i);
  BOOST_TEST(meter.most == 1);
  // The GPU left outside serves other work, and only one such task fits.
  auto outside = lumen::task(overlap).with_resources({{"gpu", 1}}).remote(9);
  BOOST_TEST(lumen::get(outside, deadline) == 9);
  auto too_many = refusal([] {
    lumen::actor<Worker>().with_resources({{"gpu", 3}}).remote();
  });
  BOOST_TEST((too_many.code() == lumen::errc::infeasible));
  // Work asking for nothing is placed in it too.
  auto plain = lumen::task(overlap).in_placement_group(pg).remote(5);
  BOOST_TEST(lumen::get(plain, deadline) == 5);
  lumen::remove_placement_group(pg);
  BOOST_TEST(eventually([] { return used_here("gpu") == 0.0; }));
}

BOOST_AUTO_TEST_CASE(ready_waits_until_the_bundles_are_free) {
  auto holder = lumen::actor<Worker>().with_resources({{"gpu", 1}}).remote();
  BOOST_TEST(lumen::get(holder.call(&Worker::step, 1), deadline) == 2);
  lumen::placement_group pg({{{"gpu", 1}}, {{"gpu", 1}}});
  BOOST_TEST(
    lumen::wait(std::vector{pg.ready()}, 1, milliseconds(300)).ready.empty());
  lumen::kill(holder);
  lumen::get(pg.ready(), deadline);
  BOOST_TEST(used_here("gpu") == 2.0);
  lumen::remove_placement_group(pg);
  BOOST_TEST(eventually([] { return used_here("gpu") == 0.0; }));
}

BOOST_AUTO_TEST_CASE(removing_a_group_ends_its_actors_and_tasks) {
  lumen::placement_group pg({{{"gpu", 1}, {"cpu", 2}}});
  auto a = lumen::actor<Worker>()
             .with_resources({{"cpu", 1}})
             .in_placement_group(pg, 0)
             .remote();
  BOOST_TEST(lumen::get(a.call(&Worker::step, 1), deadline) == 2);
  looping = false;
  auto t = lumen::task(until_cancelled).in_placement_group(pg, 0).remote(1);
  BOOST_TEST(eventually([] { return looping.load(); }));
  lumen::remove_placement_group(pg);
  lumen::remove_placement_group(pg); // a second time does nothing
  BOOST_CHECK_THROW(lumen::get(t, deadline), lumen::task_cancelled);
  try {
    lumen::get(a.call(&Worker::step, 2), deadline);
    BOOST_FAIL("the actor outlived its group");
  } catch (const lumen::actor_died& e) {
    BOOST_TEST(says(e, "placement group " + pg.id() + " was removed"));
  }
  BOOST_TEST(eventually([] { return used_here("gpu") == 0.0; }));
  BOOST_TEST(eventually([] { return used_here("cpu") == 0.0; }));
  // Work placed in it later is refused at once.
  auto e =
    refusal([&] { lumen::task(overlap).in_placement_group(pg).remote(1); });
  BOOST_TEST(says(e, "was removed"));
}

BOOST_AUTO_TEST_CASE(a_group_removed_before_it_is_ready_fails_ready) {
  lumen::placement_group pg({{{"gpu", 1}}});
  lumen::get(pg.ready(), deadline);
  lumen::placement_group waiting({{{"gpu", 2}}});
  auto queued = lumen::task(overlap).in_placement_group(waiting).remote(1);
  lumen::remove_placement_group(waiting);
  BOOST_CHECK_THROW(lumen::get(waiting.ready(), deadline), lumen::usage_error);
  BOOST_CHECK_THROW(lumen::get(queued, deadline), lumen::usage_error);
  lumen::remove_placement_group(pg);
  // The removed group's reserve, had it been granted, went back too.
  BOOST_TEST(eventually([] { return used_here("gpu") == 0.0; }));
  lumen::placement_group again({{{"gpu", 2}}});
  lumen::get(again.ready(), deadline);
  lumen::remove_placement_group(again);
}

BOOST_AUTO_TEST_CASE(bad_groups_and_bad_placements_are_refused_clearly) {
  auto e = refusal([] { lumen::placement_group pg({{{"gpu", 3}}}); });
  BOOST_TEST((e.code() == lumen::errc::infeasible));
  BOOST_TEST(says(e, "gpu=3"));
  // One process is one node: two bundles cannot each have their own.
  e = refusal([] {
    lumen::placement_group pg({{{"cpu", 1}}, {{"cpu", 1}}},
                              placement_strategy::strict_spread);
  });
  BOOST_TEST((e.code() == lumen::errc::infeasible));
  BOOST_TEST(says(e, "strict_spread"));
  e = refusal([] {
    lumen::placement_group pg({{{"gpu", 1}}, {{"gpu", 2}}},
                              placement_strategy::strict_pack);
  });
  BOOST_TEST(says(e, "gpu=3"));
  BOOST_CHECK_THROW(lumen::placement_group({}), lumen::usage_error);
  BOOST_CHECK_THROW(
    lumen::placement_group(std::vector<lumen::placement_group::bundle>(1)),
    lumen::usage_error);
  BOOST_CHECK_THROW(lumen::placement_group({{{"gpu", -1}}}),
                    lumen::usage_error);

  lumen::placement_group pg({{{"gpu", 1}}, {{"cpu", 1}}});
  BOOST_CHECK_THROW(lumen::task(overlap).in_placement_group(pg, 2),
                    lumen::usage_error);
  BOOST_CHECK_THROW(lumen::actor<Worker>().in_placement_group(pg, -2),
                    lumen::usage_error);
  e = refusal([&] {
    lumen::task(overlap)
      .with_resources({{"gpu", 1}})
      .in_placement_group(pg, 1)
      .remote(1);
  });
  BOOST_TEST((e.code() == lumen::errc::infeasible));
  BOOST_TEST(says(e, "bundle 1"));
  e = refusal([&] {
    lumen::actor<Worker>()
      .with_resources({{"gpu", 2}})
      .in_placement_group(pg)
      .remote();
  });
  BOOST_TEST((e.code() == lumen::errc::infeasible));
  // Any bundle: the one that holds the request.
  auto t = lumen::task(overlap)
             .with_resources({{"gpu", 1}})
             .in_placement_group(pg)
             .remote(3);
  BOOST_TEST(lumen::get(t, deadline) == 3);
  lumen::remove_placement_group(pg);
}

BOOST_AUTO_TEST_SUITE_END()
