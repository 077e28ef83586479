#define BOOST_TEST_MODULE resources_procs
#include <boost/test/unit_test.hpp>

// Resources across real processes: a node started with --resources gpu=1
// gets all the work that asks for a GPU, runs it one at a time, counts an
// actor's GPU as used in lumen status while the actor lives, and a request
// no node can meet is refused at once, naming the resource.

#include <algorithm>
#include <thread>

#include "cluster_fixture.hpp"
#include "cluster_job.hpp"

using namespace lumen::test;

BOOST_TEST_GLOBAL_FIXTURE(cluster_fixture);

namespace {

// The cluster's one node with a GPU, started by the first test that needs
// it and kept for the others.
const started_node& gpu_node() {
  static started_node node = the_cluster->start(
    {"--address", the_cluster->head.address, "--resources", "gpu=1"});
  return node;
}

double gpu_used_on(const std::string& node) {
  for (auto& n : lumen::nodes())
    if (n.id == node) {
      auto i = n.used.find("gpu");
      return i == n.used.end() ? 0.0 : i->second;
    }
  return -1;
}

/// Polls the directory for up to 30 s (nodes report every 200 ms, a
/// driver's view is a second old at most).
bool gpu_use_becomes(const std::string& node, double amount) {
  return eventually([&] { return gpu_used_on(node) == amount; },
                    milliseconds(50));
}

template <class F>
std::string refusal(F f) {
  try {
    f();
  } catch (const lumen::usage_error& e) {
    BOOST_TEST((e.code() == lumen::errc::infeasible));
    return e.what();
  }
  BOOST_FAIL("the request was not refused");
  return {};
}

} // namespace

BOOST_AUTO_TEST_SUITE(resources)

BOOST_AUTO_TEST_CASE(gpu_tasks_go_to_the_gpu_node_one_at_a_time) {
  auto gpu = gpu_node().id;
  std::vector<lumen::ObjectRef<std::string>> places;
  std::vector<lumen::ObjectRef<std::vector<int64_t>>> spans;
  for (int i = 0; i < 3; ++i) {
    places.push_back(
      lumen::task(where).spread().with_resources({{"gpu", 1}}).remote());
    spans.push_back(
      lumen::task(busy_span).spread().with_resources({{"gpu", 1}}).remote(150));
  }
  for (auto& p : places)
    BOOST_TEST(lumen::get(p, deadline) == gpu);
  std::vector<std::vector<int64_t>> ran;
  for (auto& s : spans)
    ran.push_back(lumen::get(s, deadline));
  std::sort(ran.begin(), ran.end());
  for (size_t i = 1; i < ran.size(); ++i)
    BOOST_TEST(ran[i][0] >= ran[i - 1][1]); // never two at once
  // Tasks asking for nothing still go everywhere.
  std::set<std::string> seen;
  for (int i = 0; i < 12; ++i)
    seen.insert(lumen::get(lumen::task(where).spread().remote(), deadline));
  BOOST_TEST(seen.size() >= 3u);
}

BOOST_AUTO_TEST_CASE(an_infeasible_request_is_refused_at_once) {
  gpu_node();
  auto why = refusal([] {
    lumen::task(where).spread().with_resources({{"gpu", 2}}).remote();
  });
  BOOST_TEST(why.find("gpu") != std::string::npos);
  why = refusal([] {
    lumen::task(where).on_node("node-1").with_resources({{"gpu", 1}}).remote();
  });
  BOOST_TEST(why.find("node-1 has gpu=0") != std::string::npos);
  why = refusal([] {
    lumen::actor<Counter>(0).spread().with_resources({{"tpu", 1}}).remote();
  });
  BOOST_TEST(why.find("tpu") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_actor_holds_the_gpu_and_status_shows_it) {
  auto gpu = gpu_node().id;
  auto a =
    lumen::actor<Counter>(0).spread().with_resources({{"gpu", 1}}).remote();
  BOOST_TEST(lumen::get(a.call(&Counter::node), deadline) == gpu);
  BOOST_REQUIRE(gpu_use_becomes(gpu, 1.0));
  auto [rc, out] = the_cluster->status();
  BOOST_TEST(rc == 0);
  BOOST_TEST(out.find("gpu=1/1") != std::string::npos, out);
  // A GPU task waits on the node until the actor is gone.
  auto task = lumen::task(where).spread().with_resources({{"gpu", 1}}).remote();
  BOOST_TEST(
    lumen::wait(std::vector{task}, 1, milliseconds(500)).ready.empty());
  lumen::kill(a);
  BOOST_TEST(lumen::get(task, deadline) == gpu);
  BOOST_TEST(gpu_use_becomes(gpu, 0.0));
  std::tie(rc, out) = the_cluster->status();
  BOOST_TEST(out.find("gpu=0/1") != std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(a_bad_resources_flag_stops_lumen_start) {
  auto [rc, out] = run({LUMEN_CLI, "start", "--address",
                        the_cluster->head.address, "--resources", "gpu=-1"},
                       the_cluster->env());
  BOOST_TEST(rc == 2);
  BOOST_TEST(out.find("cpu=2,gpu=1") != std::string::npos, out);
}

BOOST_AUTO_TEST_SUITE_END()
