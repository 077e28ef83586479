#define BOOST_TEST_MODULE train
#include <boost/test/unit_test.hpp>

// Data-parallel training's core: buckets cover every parameter once, in
// the order the backward pass finishes them, the first one small; the
// backward pass says when each layer is done without changing a bit;
// replicas all-reducing bucket by bucket stay identical to the bit and
// follow one replica on the whole batch; a re-broadcast ends drift.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <lumen/errors.hpp>
#include <lumen/ml.hpp>
#include <lumen/train.hpp>

#include "metrics_files.hpp"
#include "process.hpp"
#include "runtime_fixture.hpp"

using namespace lumen;
using namespace lumen::train;

namespace {

/// `n` rows of `dim` features with labels of `classes` classes, seeded.
ml::dataset synthetic(size_t n, size_t dim, size_t classes, uint64_t seed) {
  std::mt19937_64 gen{seed};
  std::normal_distribution<float> normal;
  ml::dataset d{ml::tensor({int64_t(n), int64_t(dim)}),
                ml::tensor({int64_t(n)}, ml::dtype::int32)};
  auto x = d.features.data<float>();
  auto y = d.labels.data<int32_t>();
  for (size_t i = 0; i < n; ++i) {
    float s = 0;
    for (size_t j = 0; j < dim; ++j) {
      x[i * dim + j] = normal(gen);
      s += x[i * dim + j] * float(j % 3);
    }
    y[i] = static_cast<int32_t>(std::abs(int(s)) % int(classes));
  }
  return d;
}

/// Rows [begin, end) of `d`.
ml::dataset rows(const ml::dataset& d, size_t begin, size_t end) {
  std::vector<size_t> at;
  for (auto i = begin; i < end; ++i)
    at.push_back(i);
  return d.take(at);
}

/// Runs `f(rank)` on `world` threads, each a member of `group`.
template <class F>
void on_ranks(int world, const std::string& group, F f) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([=] {
      collective::init_group(world, r, group, collective::backend::threads);
      f(r);
      collective::destroy_group(group);
    });
  for (auto& t : threads)
    t.join();
}

void returns_at_once(const loop_config&) {}
LUMEN_TRAIN_LOOP(returns_at_once);

/// Reports the size of the group it runs in.
void reports_world_size(const loop_config&) {
  report({{"world_size", double(get_context().world_size)}});
}
LUMEN_TRAIN_LOOP(reports_world_size);

/// A name that CSV and JSON must quote.
const std::string awkward = "top, \"5\"";

/// A loop of its own: three reports, a metric whose name needs quoting,
/// another that comes only with the last report and is not a number
/// there, and a checkpoint with the first.
void reports_three_times(const loop_config&) {
  double before = 0;
  if (auto& from = get_checkpoint())
    before = double(from->files.at("done").size());
  for (int i = 1; i <= 3; ++i) {
    metrics m{{"loss", 1.0 / (before + i)}, {awkward, before + i}};
    if (i == 3)
      m["late"] = std::numeric_limits<double>::quiet_NaN();
    std::optional<checkpoint> c;
    if (i == 1)
      c = checkpoint{{{"done", std::vector<char>(size_t(i), 'x')}}};
    report(m, c);
  }
}
LUMEN_TRAIN_LOOP(reports_three_times);

} // namespace

using lumen::test::local_runtime;
BOOST_TEST_GLOBAL_FIXTURE(local_runtime);

BOOST_AUTO_TEST_SUITE(train_suite)

BOOST_AUTO_TEST_CASE(buckets_cover_every_parameter_once_last_layers_first) {
  ml::mlp net{784, {256, 128}, 10};
  auto layers = net.layers();
  BOOST_REQUIRE(layers.size() == 3u);
  BOOST_TEST(layers[2].end == net.num_params());
  for (auto cfg : {bucket_config{}, bucket_config{1, 1},
                   bucket_config{size_t{1} << 30, size_t{1} << 30},
                   bucket_config{200 << 10, 200 << 10}}) {
    auto plan = plan_buckets(layers, cfg);
    std::vector<int> covered(net.num_params(), 0);
    size_t last_layer_seen = layers.size();
    for (auto& b : plan) {
      for (auto i = b.params.begin; i < b.params.end; ++i)
        ++covered[i];
      // In backward order: each bucket's layers come before the last's.
      BOOST_TEST(b.last_layer < last_layer_seen);
      BOOST_TEST(b.params.begin == layers[b.first_layer].begin);
      BOOST_TEST(b.params.end == layers[b.last_layer].end);
      last_layer_seen = b.first_layer;
    }
    BOOST_TEST(std::all_of(covered.begin(), covered.end(),
                           [](int c) { return c == 1; }));
    BOOST_TEST(plan.front().last_layer == 2u);
  }
  // The defaults: the 5 KB last layer alone first (64 KiB), then 131 KB
  // (256 KiB cap), then the 804 KB first layer on its own.
  auto plan = plan_buckets(layers, {});
  BOOST_REQUIRE(plan.size() == 3u);
  BOOST_TEST(plan[0].params.size() == 128u * 10 + 10);
  // Caps that take everything: one bucket; the first cap holds back.
  BOOST_TEST(plan_buckets(layers, {size_t{1} << 30, size_t{1} << 30}).size() ==
             1u);
  BOOST_TEST(plan_buckets(layers, {6 << 10, size_t{1} << 30}).size() == 2u);
  BOOST_CHECK_THROW(plan_buckets(layers, {0, 1}), usage_error);
  BOOST_CHECK_THROW(plan_buckets({{0, 5}, {6, 9}}, {}), usage_error);
}

BOOST_AUTO_TEST_CASE(the_backward_pass_tells_each_layer_done_bit_for_bit) {
  ml::mlp net{20, {16, 8}, 3};
  auto batch = synthetic(40, 20, 3, 1);
  auto w = net.init(2);
  // Into the same buffer: Eigen's kernels round by the output's alignment.
  std::vector<float> grad(net.num_params());
  auto a = net.loss_and_gradient(w.data(), batch, grad.data());
  auto plain = grad;
  std::fill(grad.begin(), grad.end(), 0.0f);
  std::vector<size_t> order;
  auto b = net.loss_and_gradient(w.data(), batch, grad.data(),
                                 [&](size_t l) { order.push_back(l); });
  BOOST_TEST(a == b);
  BOOST_TEST(plain == grad);
  BOOST_TEST(order == (std::vector<size_t>{2, 1, 0}));
  // The linear models are one layer, done at the end.
  ml::linear_regression lin{4};
  auto problem = ml::make_linear_regression(10, 4, 3);
  std::vector<float> g(5);
  order.clear();
  lin.loss_and_gradient(lin.init(0).data(), problem.data, g.data(),
                        [&](size_t l) { order.push_back(l); });
  BOOST_TEST(order == (std::vector<size_t>{0}));
}

// Three replicas, each on a third of every batch, with buckets small
// enough that every layer is one: identical to the bit after 40 steps,
// and the one replica trained on the whole batches within rounding.
BOOST_AUTO_TEST_CASE(replicas_stay_identical_and_follow_the_whole_batch) {
  ml::mlp net{20, {16, 8}, 3};
  auto data = synthetic(40 * 96, 20, 3, 3);
  constexpr int world = 3;
  constexpr size_t per_rank = 32, steps = 40;
  std::vector<std::vector<float>> params(world, net.init(4));
  std::vector<float> drifts(world, -1);
  std::vector<step_timeline> timelines(world);
  on_ranks(world, "train-test-ddp", [&](int r) {
    bucketed_allreduce sync{net, "train-test-ddp", {1, 1}};
    ml::optimizer opt{{ml::optimizer_kind::momentum, 0.1f}, net.num_params()};
    std::vector<float> grad(net.num_params());
    for (size_t s = 0; s < steps; ++s) {
      auto at = s * world * per_rank + size_t(r) * per_rank;
      sync.loss_and_mean_gradient(params[r].data(),
                                  rows(data, at, at + per_rank), grad.data());
      opt.step(params[r].data(), grad.data(), grad.size());
    }
    timelines[r] = sync.last_step();
    drifts[r] = drift(params[r], "train-test-ddp");
  });
  BOOST_TEST(params[0] == params[1]);
  BOOST_TEST(params[0] == params[2]);
  for (auto d : drifts)
    BOOST_TEST(d == 0.0f);
  // One replica on whole batches: the mean of three means of 32 rows is
  // the mean of 96, up to rounding.
  auto alone = net.init(4);
  ml::optimizer opt{{ml::optimizer_kind::momentum, 0.1f}, net.num_params()};
  std::vector<float> grad(net.num_params());
  for (size_t s = 0; s < steps; ++s) {
    auto at = s * world * per_rank;
    net.loss_and_gradient(alone.data(), rows(data, at, at + world * per_rank),
                          grad.data());
    opt.step(alone.data(), grad.data(), grad.size());
  }
  float off = 0;
  for (size_t i = 0; i < alone.size(); ++i)
    off = std::max(off, std::abs(alone[i] - params[0][i]));
  BOOST_TEST(off < 1e-4f);
  // Each layer's all-reduce was asked for as the pass finished it, the
  // last layer's first, and each was seen done after it started (during
  // the pass, where the layers before it gave it the time) and before the
  // step ended.
  auto& t = timelines[0];
  BOOST_REQUIRE(t.started.size() == 3u);
  BOOST_TEST(t.started[0] <= t.started[1]);
  BOOST_TEST(t.started[1] <= t.started[2]);
  BOOST_TEST(t.started[2] <= t.backward_end);
  for (size_t b = 0; b < 3; ++b) {
    BOOST_TEST(t.finished[b] >= t.started[b]);
    BOOST_TEST(t.finished[b] <= t.end);
  }
  BOOST_TEST(t.exposed() >= 0.0);
}

BOOST_AUTO_TEST_CASE(a_rebroadcast_from_rank_0_ends_drift) {
  constexpr int world = 3;
  std::vector<std::vector<float>> params(world, std::vector<float>(1000, 1.0f));
  params[1][17] += 0.25f;
  params[2][999] -= 0.5f;
  std::vector<float> before(world), after(world);
  on_ranks(world, "train-test-drift", [&](int r) {
    before[r] = drift(params[r], "train-test-drift");
    rebroadcast(params[r], "train-test-drift");
    after[r] = drift(params[r], "train-test-drift");
  });
  for (int r = 0; r < world; ++r) {
    BOOST_TEST(before[r] == 0.5f); // at 999: 1 on rank 0, 0.5 on rank 2
    BOOST_TEST(after[r] == 0.0f);
    BOOST_TEST(params[r] == std::vector<float>(1000, 1.0f));
  }
}

// What a trainer cannot do is refused, naming the fix.
BOOST_AUTO_TEST_CASE(a_trainer_refuses_what_cannot_work_naming_the_fix) {
  auto says = [](const char* what) {
    return [what](const std::exception& e) {
      return std::string{e.what()}.find(what) != std::string::npos;
    };
  };
  BOOST_CHECK_EXCEPTION((data_parallel_trainer{"nobody", {}, {1}, {}}),
                        usage_error, says("LUMEN_TRAIN_LOOP"));
  BOOST_CHECK_EXCEPTION((data_parallel_trainer{"returns_at_once", {}, {0}, {}}),
                        usage_error, says("num_workers"));
  run_config negative;
  negative.failure.max_failures = -1;
  BOOST_CHECK_THROW(
    (data_parallel_trainer{"returns_at_once", {}, {1}, negative}), usage_error);
  // The embedded cluster is one node: two workers do not fit.
  run_config here;
  here.storage_path = "/tmp";
  BOOST_CHECK_EXCEPTION(
    (data_parallel_trainer{"returns_at_once", {}, {2}, here}.fit()), error,
    says("--local-nodes"));
  run_config nowhere;
  nowhere.storage_path = "/proc/lumen-cannot-write-here";
  BOOST_CHECK_EXCEPTION(
    (data_parallel_trainer{"returns_at_once", {}, {1}, nowhere}.fit()), error,
    says("storage_path"));
  // Outside a train loop there is no context to report in.
  BOOST_CHECK_EXCEPTION(get_context(), usage_error,
                        says("outside a train loop"));
  BOOST_CHECK_EXCEPTION(report(metrics{{"loss", 1}}), usage_error,
                        says("outside a train loop"));
  // One worker in this process runs the loop to its end.
  data_parallel_trainer alone{"returns_at_once", {}, {1}, here};
  BOOST_TEST(alone.fit().failures == 0);
  BOOST_CHECK_EXCEPTION(
    (data_parallel_trainer{"returns_at_once", {}, {2, 3}, here}), usage_error,
    says("min_workers"));
}

// An elastic trainer runs on the live nodes there are, down to
// min_workers: the embedded cluster is one node.
BOOST_AUTO_TEST_CASE(an_elastic_trainer_runs_on_the_nodes_there_are) {
  run_config here;
  here.storage_path = "/tmp";
  here.name = "elastic_" + std::to_string(::getpid());
  auto result =
    data_parallel_trainer{"reports_world_size", {}, {2, 1}, here}.fit();
  BOOST_TEST(result.last.at("world_size") == 1.0);
  std::filesystem::remove_all(run_dir(here));
}

// Whatever the loop, the run folder holds its reports as CSV rows, JSON
// lines and a plot; a new metric widens the CSV's header; names and
// values that CSV and JSON cannot hold bare come back as they went.
BOOST_AUTO_TEST_CASE(a_loop_of_its_own_leaves_rows_json_lines_and_a_plot) {
  run_config run;
  run.storage_path = lumen::test::fresh_dir("metrics");
  run.name = "own";
  auto result =
    data_parallel_trainer{"reports_three_times", {}, {1}, run}.fit();
  BOOST_TEST(result.history.size() == 3u);
  auto dir = run_dir(run);
  std::vector<std::string> header;
  auto rows = lumen::test::csv_by_header(dir + "/metrics.csv", &header);
  BOOST_TEST(header == (std::vector<std::string>{
                         "loss", awkward, "late", "rank", "training_iteration",
                         "time_total_s", "attempt", "workers"}),
             boost::test_tools::per_element());
  BOOST_REQUIRE(rows.size() == 3u);
  BOOST_TEST(rows[0].at(awkward) == "1");
  BOOST_TEST(rows[0].at("late") == ""); // not reported then
  BOOST_TEST(rows[2].at("late") == "nan");
  BOOST_TEST(std::stod(rows[2].at("loss")) == 1.0 / 3); // every digit kept
  BOOST_TEST(rows[2].at("training_iteration") == "3");
  BOOST_TEST(rows[2].at("rank") == "0");
  BOOST_TEST(rows[2].at("attempt") == "0");
  BOOST_TEST(rows[2].at("workers") == "1");
  auto json = lumen::test::json_lines(dir + "/result.json");
  BOOST_REQUIRE(json.size() == 3u);
  BOOST_TEST(json[1].at(awkward).get<double>() == 2.0);
  BOOST_TEST(json[2].at("late").is_null());
  BOOST_TEST(json[2].at("training_iteration").get<int>() == 3);
  BOOST_TEST(json[2].at("time_total_s").get<double>() >=
             json[0].at("time_total_s").get<double>());
  std::ifstream svg{dir + "/metrics.svg"};
  std::string first;
  std::getline(svg, first);
  BOOST_TEST(first.rfind("<svg", 0) == 0u);

  // Resumed into its folder, the run keeps the rows before and numbers
  // its own after them; a fresh run starts them anew.
  run.resume_from = checkpoint{{{"done", std::vector<char>(3, 'x')}}};
  data_parallel_trainer{"reports_three_times", {}, {1}, run}.fit();
  rows = lumen::test::csv_by_header(dir + "/metrics.csv", &header);
  BOOST_REQUIRE(rows.size() == 6u);
  BOOST_TEST(rows[0].at(awkward) == "1");
  BOOST_TEST(rows[3].at(awkward) == "4");
  BOOST_TEST(rows[5].at("training_iteration") == "6");
  BOOST_TEST(lumen::test::json_lines(dir + "/result.json").size() == 6u);
  // keep_on_resume chooses which earlier rows stay.
  run.metrics_files.keep_on_resume = [](const metrics& m) {
    return m.at("training_iteration") <= 2;
  };
  data_parallel_trainer{"reports_three_times", {}, {1}, run}.fit();
  rows = lumen::test::csv_by_header(dir + "/metrics.csv", nullptr);
  BOOST_REQUIRE(rows.size() == 5u);
  BOOST_TEST(rows[1].at(awkward) == "2");
  BOOST_TEST(rows[2].at(awkward) == "4");
  BOOST_TEST(rows[2].at("training_iteration") == "3");
  run.resume_from.reset();
  data_parallel_trainer{"reports_three_times", {}, {1}, run}.fit();
  BOOST_TEST(lumen::test::csv_by_header(dir + "/metrics.csv", nullptr).size() ==
             3u);
  std::filesystem::remove_all(run.storage_path);
}

// A metrics file that cannot be written fails the run, naming it.
BOOST_AUTO_TEST_CASE(a_metrics_file_that_cannot_be_written_is_named) {
  run_config run;
  run.storage_path = lumen::test::fresh_dir("metrics");
  run.name = "blocked";
  std::filesystem::create_directories(run_dir(run) + "/metrics.csv/in-the-way");
  BOOST_CHECK_EXCEPTION(
    (data_parallel_trainer{"reports_three_times", {}, {1}, run}.fit()), error,
    [&](const std::exception& e) {
      return std::string{e.what()}.find(run_dir(run) + "/metrics.csv") !=
             std::string::npos;
    });
  std::filesystem::remove_all(run.storage_path);
}

BOOST_AUTO_TEST_SUITE_END()
