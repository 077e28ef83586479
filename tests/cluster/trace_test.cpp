#define BOOST_TEST_MODULE trace
#include <boost/test/unit_test.hpp>

// `--trace FILE` and $LUMEN_TRACE: a script (traced_job) run on an
// embedded cluster of local node processes, alone, and as a driver of a
// started cluster (a head and two `lumen start` nodes) writes one Chrome
// trace file with every process's spans, on one clock, and the arrows from
// each submission to its run, across processes too.

#include <sstream>

#include "cluster_fixture.hpp"
#include "trace_file.hpp"

using namespace lumen::test;

namespace {

std::string joined(const std::vector<std::string>& lines) {
  std::ostringstream out;
  for (auto& l : lines)
    out << l << "\n";
  return out.str();
}

/// Runs traced_job with `args` to completion: its pid, exit code, output.
struct job_run {
  pid_t pid;
  int code;
  std::string output;
};

job_run run_job(std::vector<std::string> args,
                std::vector<std::string> env = {}) {
  args.insert(args.begin(), TRACED_JOB);
  process p{args, env};
  p.await_output(std::string(1, '\0'), std::chrono::minutes(2));
  auto pid = p.pid();
  auto code = p.wait();
  return {pid, code, p.output()};
}

} // namespace

BOOST_TEST_GLOBAL_FIXTURE(cluster_fixture);

BOOST_AUTO_TEST_SUITE(trace)

BOOST_AUTO_TEST_CASE(a_run_on_a_local_node_shows_both_processes_and_arrows) {
  auto dir = fresh_dir("trace");
  auto file = dir + "/run.json";
  auto job = run_job({"--local-nodes", "1", "--trace", file}, {"HOME=" + dir});
  BOOST_REQUIRE_MESSAGE(job.code == 0, job.output);
  BOOST_TEST(job.output.find("wrote the timeline of 2 processes to " + file) !=
               std::string::npos,
             job.output);
  auto t = read_trace(file);
  BOOST_TEST(t.problems.empty(), joined(t.problems));
  BOOST_REQUIRE_EQUAL(t.processes.size(), 2u);
  int64_t driver = job.pid, node = 0;
  for (auto& [pid, name] : t.processes)
    if (pid != driver)
      node = pid;
  BOOST_TEST(t.processes[node].find("node-1 (pid ") == 0, t.processes[node]);
  // The task ran on the node and here; the actor lives on the node.
  BOOST_TEST((t.pids_with("add") == std::set<int64_t>{driver, node}));
  BOOST_TEST((t.pids_with("Counter::add") == std::set<int64_t>{node}));
  BOOST_TEST((t.pids_with("Counter constructor") == std::set<int64_t>{node}));
  BOOST_TEST((t.pids_with("script") == std::set<int64_t>{driver}));
  BOOST_TEST((t.pids_with("submit add") == std::set<int64_t>{driver}));
  BOOST_TEST((t.pids_with("typed request") == std::set<int64_t>{node}));
  // add, two Counter::add calls and the typed request cross; the local
  // add does not.
  BOOST_TEST(t.cross_process_flows == 4u);
  BOOST_TEST(t.flows == 5u);
  // On the driver's clock, the node's calls happen inside the script's
  // span: its offset was measured.
  auto script = t.named("script").at(0);
  for (auto& call : t.named("Counter::add")) {
    BOOST_TEST(call.ts >= script.ts);
    BOOST_TEST(call.ts + call.dur <= script.ts + script.dur);
  }
}

BOOST_AUTO_TEST_CASE(lumen_trace_in_the_environment_traces_one_process) {
  auto dir = fresh_dir("trace");
  auto file = dir + "/alone.json";
  auto job = run_job({}, {"HOME=" + dir, "LUMEN_TRACE=" + file});
  BOOST_REQUIRE_MESSAGE(job.code == 0, job.output);
  auto t = read_trace(file);
  BOOST_TEST(t.problems.empty(), joined(t.problems));
  BOOST_TEST(t.processes.size() == 1u);
  BOOST_TEST((t.pids_with("Counter::add") == std::set<int64_t>{job.pid}));
  BOOST_TEST(t.named("add").size() == 2u);
  BOOST_TEST(t.flows == 4u); // two tasks, two calls
  BOOST_TEST(t.cross_process_flows == 0u);
}

BOOST_AUTO_TEST_CASE(a_trace_file_that_cannot_be_written_stops_the_run_first) {
  auto dir = fresh_dir("trace");
  auto job =
    run_job({"--trace", dir + "/no/such/folder/run.json"}, {"HOME=" + dir});
  BOOST_TEST(job.code == 2, job.output);
  BOOST_TEST(job.output.find("cannot write the trace file") !=
               std::string::npos,
             job.output);
  BOOST_TEST(job.output.find("give --trace a path") != std::string::npos,
             job.output);
  BOOST_TEST(job.output.find("traced_job: ran") == std::string::npos,
             job.output);
}

BOOST_AUTO_TEST_CASE(without_a_trace_file_nothing_is_recorded_or_written) {
  auto dir = fresh_dir("trace");
  auto job = run_job({"--local-nodes", "1"}, {"HOME=" + dir});
  BOOST_REQUIRE_MESSAGE(job.code == 0, job.output);
  BOOST_TEST(job.output.find("timeline") == std::string::npos, job.output);
}

BOOST_AUTO_TEST_CASE(a_driver_of_a_started_cluster_gathers_every_nodes_part) {
  auto& c = *the_cluster;
  auto file = c.home + "/cluster.json";
  auto job = run_job({"--address", c.head.address, "--token-file", c.token_file,
                      "--trace", file},
                     c.env());
  BOOST_REQUIRE_MESSAGE(job.code == 0, job.output);
  auto t = read_trace(file);
  BOOST_TEST(t.problems.empty(), joined(t.problems));
  // The driver, the head and both nodes.
  BOOST_TEST(t.processes.size() == 4u);
  auto ran = job.output.substr(job.output.find("ran on ") + 7, 6);
  auto worker =
    c.nodes[0].id == ran ? c.nodes[0].proc->pid() : c.nodes[1].proc->pid();
  BOOST_TEST((t.pids_with("Counter::add") == std::set<int64_t>{worker}));
  BOOST_TEST(t.cross_process_flows == 4u);
}

BOOST_AUTO_TEST_SUITE_END()
