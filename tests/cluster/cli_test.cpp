#define BOOST_TEST_MODULE cli
#include <boost/test/unit_test.hpp>

// The `lumen` command as scripts use it: exit codes, background start,
// status and stop.

#include <fstream>
#include <iterator>
#include <string>

#include "cluster_fixture.hpp"
#include "cluster_job.hpp"
#include "huge_pages_expected.hpp"
#include "slow_relay.hpp"

using namespace lumen::test;

BOOST_TEST_GLOBAL_FIXTURE(cluster_fixture);

BOOST_AUTO_TEST_SUITE(cli)

BOOST_AUTO_TEST_CASE(the_cli_exit_codes_tell_scripts_what_happened) {
  auto& cl = *the_cluster;
  auto code = [&](std::vector<std::string> args) {
    args.insert(args.begin(), LUMEN_CLI);
    return lumen::test::run(args, cl.env()).first;
  };
  BOOST_TEST(code({}) == 2);
  BOOST_TEST(code({"bogus"}) == 2);
  BOOST_TEST(code({"start"}) == 2);
  BOOST_TEST(code({"start", "--head", "--address", "1.2.3.4:5"}) == 2);
  BOOST_TEST(code({"start", "--head", "--port", "99999"}) == 2);
  BOOST_TEST(code({"start", "--address", "nocolon"}) == 2);
  BOOST_TEST(code({"start", "--help"}) == 0);
  BOOST_TEST(code({"status", "--help"}) == 0);
  BOOST_TEST(code({"status", "--address", "127.0.0.1:1", "--token-file",
                   cl.token_file}) == 1);
  // Empty values are mistakes, not defaults.
  BOOST_TEST(code({"start", "--head", "--host", ""}) == 2);
  BOOST_TEST(code({"status", "--address", ""}) == 2);
  BOOST_TEST(code({"status", "--token-file="}) == 2);
  // Both spellings of a flag with a value.
  BOOST_TEST(code({"status", "--address=" + cl.head.address,
                   "--token-file=" + cl.token_file}) == 0);
}

BOOST_AUTO_TEST_CASE(a_code_path_that_registers_nothing_is_a_warning) {
  auto& cl = *the_cluster;
  auto node =
    cl.start({"--address", cl.head.address, "--code-path", EMPTY_JOB});
  BOOST_TEST(node.proc->await_output("registers no remote function", seconds(5))
               .has_value(),
             node.proc->output());
  BOOST_TEST(lumen::get(lumen::task(where).on_node(node.id).remote(),
                        deadline) == node.id);
  node.proc->kill(SIGTERM);
}

/// `lumen start args` in the background with `env`: what it started.
lumen::test::started start_in_background(std::vector<std::string> args,
                                         const std::vector<std::string>& env) {
  args.insert(args.begin(), {LUMEN_CLI, "start"});
  auto [code, out] = lumen::test::run(args, env);
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  auto s = lumen::test::parse_started(out);
  BOOST_REQUIRE_MESSAGE(s, out);
  return *s;
}

BOOST_AUTO_TEST_CASE(background_nodes_start_report_and_stop) {
  // A home of its own: `lumen stop` ends the nodes recorded there, which
  // are exactly the two this test starts.
  auto home = make_temp_dir();
  std::vector<std::string> env{"HOME=" + home};
  auto head = start_in_background({"--head", "--port", "0"}, env);
  auto address = head.address;
  auto head_pid = head.pid;
  struct stat st {};
  BOOST_REQUIRE(::stat((home + "/.lumen/cluster-token").c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0600u);
  auto node_pid = start_in_background({"--address", address}, env).pid;
  // Where the system gives huge pages to those who ask, the nodes run with
  // glibc's large blocks on them (lumen/util/huge_pages.hpp); under
  // AddressSanitizer, whose allocator is not glibc's, they start once.
  lumen::test::huge_pages_expected expected;
  for (auto pid : {head_pid, node_pid}) {
    std::ifstream environ{"/proc/" + std::to_string(pid) + "/environ"};
    std::string vars{std::istreambuf_iterator<char>{environ}, {}};
    BOOST_TEST((vars.find("glibc.malloc.hugetlb=1") != std::string::npos) ==
                 expected.asked,
               "pid " << pid << ", THP " << expected.setting);
  }
  auto [status_code, status_out] =
    lumen::test::run({LUMEN_CLI, "status", "--address", address}, env);
  BOOST_TEST(status_code == 0);
  BOOST_TEST(lumen::test::status_of(status_out, "node-1") == "alive",
             status_out);
  auto [stop_code, stop_out] = lumen::test::run({LUMEN_CLI, "stop"}, env);
  BOOST_TEST(stop_code == 0);
  BOOST_TEST(stop_out.find("Stopped the head and 1 node") != std::string::npos,
             stop_out);
  // It returns once both have exited, and says so for each.
  BOOST_TEST(process_gone(head_pid));
  BOOST_TEST(process_gone(node_pid));
  BOOST_TEST(stop_out.find("head     pid " + std::to_string(head_pid) +
                           ": exited after") != std::string::npos,
             stop_out);
  BOOST_TEST(stop_out.find("node-1   pid " + std::to_string(node_pid) +
                           ": exited after") != std::string::npos,
             stop_out);
}

BOOST_AUTO_TEST_CASE(a_node_that_does_not_exit_is_killed_after_the_grace) {
  auto home = make_temp_dir();
  std::vector<std::string> env{"HOME=" + home};
  auto head = start_in_background({"--head", "--port", "0"}, env);
  auto node = start_in_background({"--address", head.address}, env);
  // A stopped process does not act on SIGTERM: as a node stuck in a
  // system call would not.
  BOOST_REQUIRE(::kill(node.pid, SIGSTOP) == 0);
  auto [stop_code, stop_out] =
    lumen::test::run({LUMEN_CLI, "stop", "--grace", "0.5"}, env);
  BOOST_TEST(stop_code == 0);
  BOOST_TEST(stop_out.find("node-1   pid " + std::to_string(node.pid) +
                           ": still running 0.50 s after SIGTERM, killed "
                           "with SIGKILL") != std::string::npos,
             stop_out);
  BOOST_TEST(process_gone(node.pid));
  BOOST_TEST(process_gone(head.pid));
  auto [again_code, again_out] = lumen::test::run({LUMEN_CLI, "stop"}, env);
  BOOST_TEST(again_out.find("Nothing to stop") != std::string::npos, again_out);
  auto [bad_code, bad_out] =
    lumen::test::run({LUMEN_CLI, "stop", "--grace", "-1"}, env);
  BOOST_TEST(bad_code == 2);
  BOOST_TEST(bad_out.find("--grace") != std::string::npos, bad_out);
}

BOOST_AUTO_TEST_CASE(a_head_slow_to_answer_is_still_reached) {
  auto& cl = *the_cluster;
  // 400 ms on each answer outlasts the wait to CAF's next heartbeat tick
  // (200 ms at most), which closed a connection still waiting for the
  // head's handshake: a loaded machine's head was unreachable.
  auto port = cl.head.address.substr(cl.head.address.rfind(':') + 1);
  slow_relay relay{static_cast<uint16_t>(std::stoi(port)), milliseconds(400)};
  auto [code, out] =
    lumen::test::run({LUMEN_CLI, "status", "--address", relay.address(),
                      "--token-file", cl.token_file},
                     cl.env());
  BOOST_TEST(code == 0, out);
  BOOST_TEST(lumen::test::status_of(out, cl.nodes[0].id) == "alive", out);
}

BOOST_AUTO_TEST_SUITE_END()
