#define BOOST_TEST_MODULE ml_procs
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

// The ML layer's typed actors spawned by name on the nodes of a real
// cluster (a head and nodes started from this very program,
// `ml_procs_test start ...`, the test as the driver): a group of ring
// peers in four processes, a node killed with SIGKILL while its peer's
// group waits for it, a parameter server on another node answering the
// MLP's gradient and refusing with codes that cross processes, a server
// sharded over two nodes answering as one, and workers in three
// processes training it while one is killed.

#include <limits.h>
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <lumen/caf_interop.hpp>
#include <lumen/cli.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

#include "closed_forms.hpp"
#include "eventually.hpp"
#include "process.hpp"

namespace coll = lumen::collective;
using namespace std::chrono;
using coll::reduce_op;
using coll::ring_peer;
using lumen::ml::tensor;
using lumen::test::eventually;
using lumen::test::matches;
using lumen::test::process;
using lumen::test::rank_input;

namespace {

constexpr auto deadline = seconds(30);
const char* self_path = nullptr;

struct node {
  std::unique_ptr<process> proc;
  std::string id;
};

/// A head and two nodes, all this program, and the test as their driver.
struct cluster {
  std::string home = [] {
    char tmpl[] = "/tmp/lumen-ml-procs-XXXXXX";
    auto dir = ::mkdtemp(tmpl);
    BOOST_REQUIRE(dir != nullptr);
    return std::string{dir};
  }();
  std::string token_file = home + "/token";
  std::string address;
  std::vector<node> nodes;

  node start(std::vector<std::string> extra) {
    std::vector<std::string> argv{
      self_path,  "start",      "--block", "--token-file",
      token_file, "--num-cpus", "2"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p =
      std::make_unique<process>(argv, std::vector<std::string>{"HOME=" + home});
    auto out = p->await_output("(pid", seconds(30));
    BOOST_REQUIRE_MESSAGE(out, "a node did not start: " << p->output());
    auto s = lumen::test::parse_started(*out);
    BOOST_REQUIRE(s);
    if (address.empty())
      address = s->address;
    return {std::move(p), s->id};
  }

  cluster() {
    nodes.push_back(start({"--head", "--port", "0"}));
    nodes.push_back(start({"--address", address}));
    nodes.push_back(start({"--address", address}));
    lumen::init_options opts;
    opts.address = address;
    opts.token_file = token_file;
    lumen::init(opts);
  }

  ~cluster() {
    lumen::shutdown();
    for (auto& n : nodes)
      if (n.proc->running())
        n.proc->kill(SIGTERM);
  }
};

cluster* the_cluster = nullptr;

struct cluster_fixture {
  cluster_fixture()
    : c(std::make_unique<cluster>()) {
    the_cluster = c.get();
  }
  std::unique_ptr<cluster> c;
};

/// Every peer's allreduce of its rank's input; the refs, all sent first.
std::vector<lumen::ObjectRef<tensor>>
allreduce_on(const std::vector<ring_peer>& peers, const std::string& group,
             size_t length) {
  std::vector<lumen::ObjectRef<tensor>> refs;
  for (size_t r = 0; r < peers.size(); ++r)
    refs.push_back(lumen::call(peers[r], coll::allreduce_atom::value, group,
                               rank_input(static_cast<int>(r), length),
                               reduce_op::sum));
  return refs;
}

} // namespace

BOOST_TEST_GLOBAL_FIXTURE(cluster_fixture);

BOOST_AUTO_TEST_SUITE(ml_procs)

BOOST_AUTO_TEST_CASE(peers_on_four_processes_allreduce_a_megabyte_and_gather) {
  auto& c = *the_cluster;
  std::vector<ring_peer> peers{coll::spawn_ring_peer(c.nodes[1].id),
                               coll::spawn_ring_peer(c.nodes[2].id),
                               coll::spawn_ring_peer(c.nodes[0].id),
                               coll::spawn_ring_peer(lumen::this_node_id())};
  BOOST_CHECK(peers[0]->node() != lumen::system().node());
  coll::create_group(peers, "spread");
  const size_t length = 1 << 20;
  for (auto& t : lumen::get(allreduce_on(peers, "spread", length), deadline)) {
    BOOST_TEST(t.numel() == length);
    BOOST_TEST(matches(t, reduce_op::sum, 4));
  }
  std::vector<lumen::ObjectRef<std::vector<tensor>>> gathers;
  for (size_t r = 0; r < peers.size(); ++r)
    gathers.push_back(lumen::call(peers[r], coll::allgather_atom::value,
                                  "spread",
                                  rank_input(static_cast<int>(r), 7)));
  for (auto& all : lumen::get(gathers, deadline)) {
    BOOST_REQUIRE_EQUAL(all.size(), 4u);
    BOOST_TEST(all[3].to_vector<float>() ==
               rank_input(3, 7).to_vector<float>());
  }
  coll::destroy_group(peers, "spread");
}

BOOST_AUTO_TEST_CASE(a_killed_node_fails_its_group_within_2_s_naming_the_rank) {
  auto& c = *the_cluster;
  c.nodes.push_back(c.start({"--address", c.address}));
  auto& victim = c.nodes.back();
  std::vector<ring_peer> peers{coll::spawn_ring_peer(lumen::this_node_id()),
                               coll::spawn_ring_peer(c.nodes[1].id),
                               coll::spawn_ring_peer(victim.id)};
  coll::create_group(peers, "kill");
  // Ranks 0 and 1 wait inside the all-reduce for rank 2, which never comes.
  // No public state shows a peer waiting inside a collective, so this hold
  // only makes that the likely case; ranks that entered after the kill
  // must fail as fast and name rank 2 too, so it cannot fail a good run.
  auto waiting = allreduce_on({peers[0], peers[1]}, "kill", 1000);
  std::this_thread::sleep_for(milliseconds(300));
  auto killed = steady_clock::now();
  victim.proc->kill(SIGKILL);
  for (int r : {0, 1}) {
    try {
      lumen::get(waiting[static_cast<size_t>(r)], deadline);
      BOOST_ERROR("rank " << r << " did not fail");
    } catch (const lumen::typed_actor_error& e) {
      auto took = duration<double>(steady_clock::now() - killed).count();
      BOOST_TEST(took < 2.0, "rank " << r << " took " << took << " s");
      std::string what = e.what();
      BOOST_TEST_MESSAGE("rank " << r << " failed after " << took
                                 << " s: " << what);
      BOOST_TEST(what.find("group 'kill'") != std::string::npos, what);
      BOOST_TEST(what.find("rank 2") != std::string::npos, what);
    }
  }
  BOOST_CHECK_THROW(
    lumen::get(lumen::call(peers[2], coll::barrier_atom::value, "kill"),
               deadline),
    lumen::actor_died);
  // The survivors leave; the name takes a new rank 2 on a live node.
  coll::destroy_group({peers[0], peers[1]}, "kill");
  peers[2] = coll::spawn_ring_peer(c.nodes[2].id);
  coll::create_group(peers, "kill");
  for (auto& t : lumen::get(allreduce_on(peers, "kill", 1000), deadline))
    BOOST_TEST(matches(t, reduce_op::sum, 3));
  coll::destroy_group(peers, "kill");
}

BOOST_AUTO_TEST_CASE(a_parameter_server_on_a_node_takes_the_mlps_gradient) {
  auto& c = *the_cluster;
  lumen::ml::mlp model{784, {256, 128}, 10};
  lumen::ml::ps_config cfg;
  cfg.workers = 2;
  auto ps =
    lumen::ml::spawn_parameter_server(cfg, model.init(1), c.nodes[1].id);
  BOOST_CHECK(ps->node() != lumen::system().node());
  // Two workers' 940,584-byte gradients close the step; both hear of it.
  tensor g({static_cast<int64_t>(model.num_params())});
  std::fill(g.data<float>(), g.data<float>() + g.numel(), 1.0f);
  std::vector<lumen::ObjectRef<std::tuple<uint64_t, tensor>>> pushes;
  for (int w = 0; w < 2; ++w)
    pushes.push_back(
      lumen::call(ps, lumen::ml::push_atom::value, uint64_t{0}, g));
  auto start = model.init(1);
  for (auto& [version, weights] : lumen::get(pushes, deadline)) {
    BOOST_TEST(version == 1u);
    BOOST_TEST(weights.numel() == model.num_params());
    BOOST_TEST(std::abs(weights.data<float>()[5] - (start[5] - 0.01f)) < 1e-6f);
  }
  // A refusal keeps its code across processes.
  try {
    lumen::get(lumen::call(ps, lumen::ml::push_atom::value, uint64_t{9}, g),
               deadline);
    BOOST_ERROR("a gradient from the future was taken");
  } catch (const lumen::typed_actor_error& e) {
    BOOST_TEST((lumen::ml::refusal_of(e) == lumen::ml::ps_refusal::future),
               e.what());
    // It names the server's node, not the caller's, and what was refused.
    BOOST_TEST(e.node() == c.nodes[1].id);
    BOOST_TEST(std::string{e.what()}.rfind(
                 "parameter server on " + c.nodes[1].id +
                   " refused a gradient: future: a gradient of version 9",
                 0) == 0,
               e.what());
  }
  // A wrong size and a NaN are told apart by their refusal codes.
  auto refusal = [&](const tensor& bad) {
    try {
      lumen::get(lumen::call(ps, lumen::ml::push_atom::value, uint64_t{1}, bad),
                 deadline);
    } catch (const lumen::typed_actor_error& e) {
      BOOST_TEST(e.node() == c.nodes[1].id);
      return lumen::ml::refusal_of(e);
    }
    return std::optional<lumen::ml::ps_refusal>{};
  };
  tensor short_one({7});
  BOOST_TEST((refusal(short_one) == lumen::ml::ps_refusal::wrong_size));
  tensor nan_one = g.clone();
  nan_one.data<float>()[3] = std::nanf("");
  BOOST_TEST((refusal(nan_one) == lumen::ml::ps_refusal::not_finite));
}

BOOST_AUTO_TEST_CASE(a_large_models_server_gets_its_weights_on_the_data_plane) {
  // 3M parameters: past what the spawn's CAF request carries, they follow
  // it on the data plane; the server holds them exactly.
  auto& c = *the_cluster;
  std::vector<float> start(3'000'000);
  for (size_t i = 0; i < start.size(); ++i)
    start[i] = float(i % 1000) * 0.5f;
  lumen::ml::ps_config cfg;
  auto ps = lumen::ml::spawn_parameter_server(cfg, start, c.nodes[2].id);
  auto held =
    lumen::get(lumen::call(ps, lumen::ml::get_weights_atom::value), deadline);
  BOOST_REQUIRE(held.numel() == start.size());
  BOOST_TEST(held.to_vector<float>() == start);
  // Once it took a gradient its weights are its own.
  tensor g({static_cast<int64_t>(start.size())});
  std::fill(g.data<float>(), g.data<float>() + g.numel(), 1.0f);
  lumen::get(lumen::call(ps, lumen::ml::push_atom::value, uint64_t{0}, g),
             deadline);
  try {
    lumen::get(
      lumen::call(ps, lumen::ml::start_from_atom::value, tensor::from(start)),
      deadline);
    BOOST_ERROR("a server that took a gradient started over");
  } catch (const lumen::typed_actor_error& e) {
    BOOST_TEST(std::string{e.what()}.find("has taken gradients already") !=
                 std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(a_server_sharded_over_two_nodes_answers_as_one_would) {
  // The shards' answers land side by side in one buffer (parts of 200 KB:
  // read off the sockets into place); the buffer is used again once the
  // weights it holds are let go, never while they are held.
  auto& c = *the_cluster;
  auto cfg = lumen::ml::ps_config{};
  cfg.optimizer.kind = lumen::ml::optimizer_kind::momentum;
  std::vector<float> start(100001);
  for (size_t i = 0; i < start.size(); ++i)
    start[i] = 0.001f * static_cast<float>(i % 977);
  auto one = lumen::ml::spawn_parameter_server(cfg, start, c.nodes[1].id);
  lumen::ml::sharded_server two{cfg, start, {c.nodes[1].id, c.nodes[2].id}};
  // Where a tensor's numbers are (the non-const raw() would copy a view).
  auto address = [](const tensor& t) {
    return static_cast<const void*>(t.raw());
  };
  tensor held;
  for (uint64_t v = 0; v < 4; ++v) {
    tensor g({static_cast<int64_t>(start.size())});
    for (size_t i = 0; i < start.size(); ++i)
      g.data<float>()[i] = std::sin(static_cast<float>(v * 7 + i));
    auto [v1, w1] =
      lumen::get(lumen::call(one, lumen::ml::push_atom::value, v, g), deadline);
    auto before = held.numel() > 0 ? held.clone() : held;
    auto [v2, w2] = two.push(v, g);
    BOOST_TEST(v1 == v2);
    BOOST_CHECK(w1 == w2); // the same floats, element by element
    if (held.numel() > 0) {
      BOOST_CHECK(held == before); // the last answer, held, is unchanged
      BOOST_TEST(address(held) != address(w2));
    }
    held = w2;
  }
  auto at = address(held);
  held = tensor{};
  auto [v, w] = two.pull();
  BOOST_TEST(v == 4u);
  BOOST_TEST(address(w) == at); // let go: used again
  BOOST_CHECK(w == std::get<1>(lumen::get(
                     lumen::call(one, lumen::ml::pull_atom::value), deadline)));
}

// Workers in three processes train a sync server in a fourth; one
// worker's node is killed with SIGKILL mid-training. The step it misses
// closes without it once it waited 20 times the usual step (or at once,
// if the server hears of the worker's end first), the server waits for
// it no more, and the others train on.
BOOST_AUTO_TEST_CASE(a_worker_killed_mid_step_is_not_waited_for) {
  namespace ml = lumen::ml;
  auto& c = *the_cluster;
  c.nodes.push_back(c.start({"--address", c.address}));
  auto& victim = c.nodes.back();
  auto problem = ml::make_linear_regression(3000, 4, 5, 0.001f);
  ml::ps_config cfg;
  cfg.workers = 3;
  cfg.optimizer.lr = 0.2f;
  auto ps = ml::spawn_parameter_server(cfg, ml::linear_regression{4}.init(0),
                                       c.nodes[1].id);
  ml::worker_config wcfg;
  wcfg.model = {"linear_regression", 4, {}, 1};
  wcfg.batch_size = 100;
  wcfg.slow.factor = 50; // steps long enough to be killed inside one
  std::vector<std::string> places{lumen::this_node_id(), c.nodes[2].id,
                                  victim.id};
  std::vector<lumen::ObjectRef<ml::worker_report>> runs;
  for (size_t w = 0; w < 3; ++w) {
    auto worker =
      ml::spawn_worker(wcfg, ml::shard_of(problem.data, w, 3, 2), places[w]);
    runs.push_back(
      lumen::call(worker, ml::train_atom::value, ps, uint64_t{1000000}));
  }
  auto version = [&] {
    return lumen::get(lumen::call(ps, ml::ps_stats_atom::value), deadline)
      .version;
  };
  BOOST_REQUIRE_MESSAGE(
    eventually([&] { return version() >= 20; }, milliseconds(10)),
    "the server did not reach step 20 with all three workers");
  victim.proc->kill(SIGKILL);
  auto killed = steady_clock::now();
  auto at_kill = version();
  eventually([&] { return version() >= at_kill + 20; }, milliseconds(10),
             seconds(20));
  auto took = duration<double>(steady_clock::now() - killed).count();
  auto report = lumen::get(lumen::call(ps, ml::ps_stats_atom::value));
  BOOST_TEST_MESSAGE("20 steps after the kill took " << took << " s");
  BOOST_TEST(took < 2.0);
  BOOST_TEST(report.workers_lost == 1u);
  BOOST_TEST(report.timed_out <= 1u);
  BOOST_CHECK_THROW(lumen::get(runs[2], deadline), lumen::actor_died);
}

BOOST_AUTO_TEST_SUITE_END()

int main(int argc, char** argv) {
  // `ml_procs_test start ...`: this program as a head or a node.
  if (argc > 1 && std::string{argv[1]} == "start")
    return lumen::cli_main(argc, argv);
  static char self[PATH_MAX];
  self_path = ::realpath(argv[0], self);
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
