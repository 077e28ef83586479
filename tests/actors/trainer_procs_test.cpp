#define BOOST_TEST_MODULE trainer_procs
#include <boost/test/unit_test.hpp>

// The data-parallel trainer with its workers in processes of their own
// (train_job on an embedded cluster of local nodes): every epoch reported
// once and in order, replicas identical, checkpoints stored; a worker
// killed with SIGKILL mid-epoch survived by a restart from the last
// checkpoint that loses no report.

#include <stdlib.h>

#include <filesystem>
#include <string>

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
