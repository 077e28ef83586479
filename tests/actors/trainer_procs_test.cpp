#define BOOST_TEST_MODULE trainer_procs
#include <boost/test/unit_test.hpp>

// The data-parallel trainer with its workers in processes of their own
// (train_job on an embedded cluster of local nodes): every epoch reported
// once and in order, replicas identical, checkpoints stored; a worker
// killed with SIGKILL mid-epoch survived by a restart from the last
// checkpoint that loses no report. Every rank's reports are rows of the
// run folder's metrics files when asked for.

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "metrics_files.hpp"
#include "process.hpp"

namespace {

bool has(const std::string& out, const std::string& line) {
  return out.find(line) != std::string::npos;
}

/// The job's "final loss=" figure.
double final_loss(const std::string& out) {
  auto at = out.find("final loss=");
  BOOST_REQUIRE(at != std::string::npos);
  return std::stod(out.substr(at + 11));
}

} // namespace

BOOST_AUTO_TEST_CASE(two_workers_report_every_epoch_with_identical_replicas) {
  auto dir = lumen::test::fresh_dir("trainer");
  auto [code, out] = lumen::test::run({TRAIN_JOB, "--local-nodes", "2", dir});
  BOOST_TEST(code == 0, out);
  BOOST_TEST(has(out, "failures=0"), out);
  BOOST_TEST(has(out, "epochs reported: 0 1 2 3 4 5\n"), out);
  BOOST_TEST(has(out, "largest drift=0\n"), out);
  BOOST_TEST(final_loss(out) < 1e-3, out);
  // The latest two and the best are kept; the best has the lowest loss,
  // which is the latest here.
  BOOST_TEST(has(out, "last checkpoint=" + dir + "/clean/checkpoint_5"), out);
  BOOST_TEST(has(out, "best checkpoint=" + dir + "/clean/checkpoint_5"), out);
  BOOST_TEST(std::filesystem::exists(dir + "/clean/checkpoint_5/weights"));
  BOOST_TEST(std::filesystem::exists(dir + "/clean/checkpoint_4/epoch"));
  BOOST_TEST(!std::filesystem::exists(dir + "/clean/checkpoint_3"));
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(
  a_worker_killed_mid_epoch_is_survived_from_the_checkpoint) {
  auto dir = lumen::test::fresh_dir("trainer");
  auto [code, out] =
    lumen::test::run({TRAIN_JOB, "--local-nodes", "2", dir, "kill"});
  BOOST_TEST(code == 0, out);
  BOOST_TEST(has(out, "failures=1"), out);
  // Epochs 0 and 1 came before the kill; the restart resumed at 2.
  BOOST_TEST(has(out, "epochs reported: 0 1 2 3 4 5\n"), out);
  BOOST_TEST(has(out, "largest drift=0\n"), out);
  BOOST_TEST(has(out, "attempt failed: "), out);
  BOOST_TEST(final_loss(out) < 1e-3, out);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(every_ranks_reports_are_rows_when_all_are_kept) {
  auto dir = lumen::test::fresh_dir("trainer");
  auto [code, out] =
    lumen::test::run({TRAIN_JOB, "--local-nodes", "2", dir, "ranks"});
  BOOST_TEST(code == 0, out);
  // The driver's history is rank 0's alone.
  BOOST_TEST(has(out, "epochs reported: 1 2 3\n"), out);
  auto rows = lumen::test::csv_by_header(dir + "/ranks/metrics.csv", nullptr);
  auto json = lumen::test::json_lines(dir + "/ranks/result.json");
  BOOST_REQUIRE(rows.size() == 6u);
  BOOST_REQUIRE(json.size() == 6u);
  for (int rank : {0, 1}) {
    std::vector<std::string> epochs, iterations;
    for (auto& r : rows)
      if (r.at("rank") == std::to_string(rank)) {
        epochs.push_back(r.at("epoch"));
        iterations.push_back(r.at("training_iteration"));
        BOOST_TEST(std::stod(r.at("loss")) ==
                   rank + 1.0 / std::stod(r.at("epoch")));
      }
    BOOST_TEST(epochs == (std::vector<std::string>{"1", "2", "3"}),
               boost::test_tools::per_element());
    BOOST_TEST(iterations == epochs, boost::test_tools::per_element());
    BOOST_TEST(std::count_if(json.begin(), json.end(), [&](auto& j) {
                 return j.at("rank").template get<int>() == rank;
               }) == 3);
  }
  BOOST_TEST(std::filesystem::exists(dir + "/ranks/metrics.svg"));
  std::filesystem::remove_all(dir);
}
