#define BOOST_TEST_MODULE collective_procs
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

// Collective groups whose members are processes of their own, meeting
// through a real head: every collective against closed forms, a member
// killed with SIGKILL in the middle of an all-reduce, one frozen with
// SIGSTOP named in the others' timeouts, and the bad-input rules across
// processes.

#include <stdlib.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "process.hpp"

using namespace std::chrono;
using lumen::test::process;

namespace {

/// A head on loopback (with TLS if asked) and the members started against it.
struct head_fixture {
  std::string home = lumen::test::fresh_dir("collective");
  std::string token_file = home + "/token";
  std::unique_ptr<process> head;
  std::string address;
  bool tls = false;

  explicit head_fixture(bool with_tls = false)
    : tls(with_tls) {
    std::vector<std::string> argv{
      LUMEN_CLI, "start",        "--block",  "--head",     "--port",
      "0",       "--token-file", token_file, "--num-cpus", "1"};
    if (tls)
      argv.push_back("--tls");
    head = std::make_unique<process>(argv, env());
    auto out = head->await_output("(pid", seconds(30));
    BOOST_REQUIRE_MESSAGE(out, "the head did not start: " << head->output());
    auto s = lumen::test::parse_started(*out);
    BOOST_REQUIRE(s);
    address = s->address;
  }

  ~head_fixture() {
    head->kill(SIGTERM);
  }

  std::vector<std::string> env() const {
    std::vector<std::string> e{"HOME=" + home};
    if (tls)
      e.push_back("LUMEN_TLS=1");
    return e;
  }

  std::unique_ptr<process> member(const std::string& group, int world, int rank,
                                  const std::string& mode) {
    return std::make_unique<process>(
      std::vector<std::string>{COLLECTIVE_MEMBER, address, token_file, group,
                               std::to_string(world), std::to_string(rank),
                               mode},
      env());
  }

  std::vector<std::unique_ptr<process>>
  members(const std::string& group, int world, const std::string& mode) {
    std::vector<std::unique_ptr<process>> out;
    for (int r = 0; r < world; ++r)
      out.push_back(member(group, world, r, mode));
    return out;
  }
};

/// Every member ends well and says "ok".
void expect_ok(const std::vector<std::unique_ptr<process>>& ms) {
  for (auto& m : ms) {
    BOOST_TEST(m->wait() == 0, m->output());
    BOOST_TEST(m->output().find("ok") != std::string::npos, m->output());
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(members_in_processes_of_their_own_get_every_op_right) {
  head_fixture h;
  for (int n : {2, 3, 4}) {
    auto ms = h.members("sweep" + std::to_string(n), n, "sweep");
    for (int r = 0; r < n; ++r) {
      auto& m = *ms[static_cast<size_t>(r)];
      BOOST_TEST(m.wait() == 0,
                 "n=" << n << " rank " << r << ": " << m.output());
      BOOST_TEST(m.output().find("ok") != std::string::npos, m.output());
    }
  }
}

BOOST_AUTO_TEST_CASE(the_ring_runs_over_tls_too) {
  head_fixture h{true};
  expect_ok(h.members("tls", 3, "sweep"));
}

BOOST_AUTO_TEST_CASE(started_allreduces_meet_in_shared_memory) {
  head_fixture h;
  for (int n : {2, 3})
    expect_ok(h.members("started" + std::to_string(n), n, "started"));
}

namespace {

boost::test_tools::assertion_result
can_make_mount_namespaces(boost::unit_test::test_unit_id) {
  auto [code, out] =
    lumen::test::run({"/usr/bin/unshare", "--mount", "/bin/true"});
  boost::test_tools::assertion_result can{code == 0};
  can.message() << "making a mount namespace needs root: " << out;
  return can;
}

} // namespace

// Two members in a mount namespace whose /dev/shm holds 8 MiB, as in a
// container: what fits still meets there, a kept buffer that does not is
// ordinary memory, and a copy that cannot fit fails the group naming the
// fix, where touching pages past the end was a SIGBUS.
BOOST_AUTO_TEST_CASE(
  a_small_dev_shm_is_an_error_naming_the_fix_not_a_crash,
  *boost::unit_test::precondition(can_make_mount_namespaces)) {
  head_fixture h;
  std::string script = "mount -t tmpfs -o size=8m tmpfs /dev/shm || exit 9; ";
  for (int r : {0, 1})
    script += std::string{COLLECTIVE_MEMBER} + " " + h.address + " " +
              h.token_file + " small_shm 2 " + std::to_string(r) +
              " small_shm > " + h.home + "/rank" + std::to_string(r) +
              " 2>&1 & r" + std::to_string(r) + "=$!; ";
  script += "wait $r0; echo rank 0 exit $?; wait $r1; echo rank 1 exit $?";
  auto [code, out] = lumen::test::run(
    {"/usr/bin/unshare", "--mount", "/bin/sh", "-c", script}, h.env());
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  int naming_the_fix = 0;
  for (int r : {0, 1}) {
    BOOST_TEST(out.find("rank " + std::to_string(r) + " exit 3") !=
                 std::string::npos,
               out);
    std::ifstream f{h.home + "/rank" + std::to_string(r)};
    std::string got{std::istreambuf_iterator<char>{f}, {}};
    for (auto* line :
         {"kept 1000: shared", "kept 3M: own memory", "started 500k: right",
          "error: group 'small_shm'", "/dev/shm has "})
      BOOST_TEST(got.find(line) != std::string::npos,
                 "rank " << r << " lacks '" << line << "': " << got);
    BOOST_TEST(got.find("FAIL") == std::string::npos, got);
    naming_the_fix += got.find("docker run --shm-size=") != std::string::npos;
  }
  BOOST_TEST(naming_the_fix >= 1);
}

BOOST_AUTO_TEST_CASE(a_started_allreduce_of_other_lengths_fails_every_rank) {
  head_fixture h;
  auto ms = h.members("mismatch_started", 3, "mismatch_started");
  for (auto& m : ms) {
    m->wait();
    auto& out = m->output();
    BOOST_TEST(out.find("error: group 'mismatch_started'") != std::string::npos,
               out);
    BOOST_TEST(out.find("999 float32") != std::string::npos, out);
    BOOST_TEST(out.find("1000 float32") != std::string::npos, out);
    // Numbered as the group counts its members' operations: the first.
    BOOST_TEST(
      out.find("called at collective_member.cpp:") != std::string::npos, out);
    BOOST_TEST(out.find(" as operation 1") != std::string::npos, out);
  }
}

BOOST_DATA_TEST_CASE(a_member_killed_mid_allreduce_fails_the_others_in_2s,
                     boost::unit_test::data::make({"loop", "loop_started"}),
                     mode) {
  head_fixture h;
  const int n = 4;
  auto ms = h.members("kill", n, mode);
  for (auto& m : ms)
    BOOST_REQUIRE_MESSAGE(m->await_output("looping", seconds(30)), m->output());
  auto killed = steady_clock::now();
  ms[2]->kill(SIGKILL);
  for (int r : {0, 1, 3}) {
    auto& m = *ms[static_cast<size_t>(r)];
    auto out = m.await_output("error:", seconds(10));
    auto took = duration<double>(steady_clock::now() - killed).count();
    BOOST_REQUIRE_MESSAGE(out, "rank " << r << " did not fail: " << m.output());
    BOOST_TEST(took < 2.0, "rank " << r << " took " << took << " s");
    BOOST_TEST(out->find("group 'kill'") != std::string::npos, *out);
    BOOST_TEST(out->find("rank 2 is gone") != std::string::npos, *out);
    // The survivors' records, gathered without waiting for the dead.
    BOOST_TEST(out->find("flight records of 3 of 4 members in " + h.home +
                         "/.lumen/flight/flight-kill.json") !=
                 std::string::npos,
               *out);
    BOOST_TEST(out->find("rank 2 did not answer") != std::string::npos, *out);
  }
  // Only then their ends: each serves its records a moment after the
  // failure (records_wait), which is no part of how soon it failed.
  for (int r : {0, 1, 3})
    BOOST_TEST(ms[static_cast<size_t>(r)]->wait() == 3);
  // The name is free again: a new group of the survivors and a new rank 2.
  expect_ok(h.members("kill", n, "again"));
}

BOOST_AUTO_TEST_CASE(a_frozen_member_is_named_in_the_others_timeouts) {
  head_fixture h;
  const int n = 4;
  auto ms = h.members("frozen", n, "loop_started");
  for (auto& m : ms)
    BOOST_REQUIRE_MESSAGE(m->await_output("looping", seconds(30)), m->output());
  ms[2]->signal(SIGSTOP); // alive, its links open, silent
  for (int r : {0, 1, 3}) {
    auto& m = *ms[static_cast<size_t>(r)];
    auto out = m.await_output("error:", seconds(30));
    BOOST_REQUIRE_MESSAGE(out, "rank " << r << " did not fail: " << m.output());
    BOOST_TEST(out->find("group 'frozen'") != std::string::npos, *out);
    BOOST_TEST(out->find(" ms for rank 2 to ") != std::string::npos, *out);
    BOOST_TEST(out->find("rank 2 did not answer") != std::string::npos, *out);
  }
  ms[2]->kill(SIGKILL);
}

BOOST_AUTO_TEST_CASE(a_member_stuck_in_its_compute_is_shown_and_named) {
  head_fixture h;
  auto ms = h.members("stall", 3, "stall");
  for (auto& m : ms)
    BOOST_REQUIRE_MESSAGE(m->await_output("stalling", seconds(30)),
                          m->output());
  auto& out2 = ms[2]->output();
  auto at = out2.find("calling at ");
  BOOST_REQUIRE(at != std::string::npos);
  auto site = out2.substr(at + 11, out2.find('\n', at) - at - 11);
  std::this_thread::sleep_for(seconds(1)); // rank 2 computes, the others wait

  // The doctor, as a user runs it against the cluster.
  auto doctor = [&](std::vector<std::string> more) {
    std::vector<std::string> argv{LUMEN_CLI, "doctor",       "--address",
                                  h.address, "--token-file", h.token_file};
    argv.insert(argv.end(), more.begin(), more.end());
    return lumen::test::run(argv, h.env());
  };
  auto [rc, shown] = doctor({});
  BOOST_TEST(rc == 0, shown);
  BOOST_TEST(shown.find("group 'stall': 3 members, 3 answered") !=
               std::string::npos,
             shown);
  BOOST_TEST(shown.find(": outside any collective for ") != std::string::npos,
             shown);
  BOOST_TEST(shown.find("last called allreduce at " + site +
                        " as operation 5") != std::string::npos,
             shown);
  BOOST_TEST(shown.find("in allreduce at " + site + " (operation 6) for ") !=
               std::string::npos,
             shown);
  BOOST_TEST(shown.find("waiting for rank 2") != std::string::npos, shown);
  BOOST_TEST(shown.find("behind: rank 2 by 1 operation") != std::string::npos,
             shown);
  auto [jrc, json_text] = doctor({"--json", "--group", "stall"});
  BOOST_TEST(jrc == 0, json_text);
  auto report = nlohmann::json::parse(json_text, nullptr, false);
  BOOST_REQUIRE_MESSAGE(report.is_object(), json_text);
  BOOST_REQUIRE(report["groups"].size() == 1u);
  auto& g = report["groups"][0];
  BOOST_TEST(g["members"].size() == 3u);
  BOOST_REQUIRE(g["behind"].size() == 1u);
  BOOST_TEST(g["behind"][0]["rank"] == 2);
  BOOST_TEST(g["members"][2]["state"] == "outside");
  BOOST_TEST(g["members"][0]["state"] == "in_collective");

  // SIGUSR1: a member writes its records where it was told, and says so.
  ms[0]->signal(SIGUSR1);
  auto said = ms[0]->await_output("written to ", seconds(10));
  BOOST_REQUIRE_MESSAGE(said, ms[0]->output());
  auto mine = h.home + "/.lumen/flight/flight-pid" +
              std::to_string(ms[0]->pid()) + ".json";
  std::ifstream signalled{mine};
  auto records = nlohmann::json::parse(signalled, nullptr, false);
  BOOST_REQUIRE_MESSAGE(records.is_object(), mine);
  BOOST_TEST(records["members"][0]["state"] == "in_collective");
  BOOST_TEST(records["members"][0]["records"].size() == 6u);

  // The others time out naming rank 2, where it last called, and the file.
  for (int r : {0, 1}) {
    auto& m = *ms[static_cast<size_t>(r)];
    auto out = m.await_output("error:", seconds(30));
    BOOST_REQUIRE_MESSAGE(out, "rank " << r << " did not fail: " << m.output());
    BOOST_TEST(out->find("rank 2 is behind by 1 operation: outside any "
                         "collective for ") != std::string::npos,
               *out);
    BOOST_TEST(out->find("last called allreduce at " + site +
                         " as operation 5") != std::string::npos,
               *out);
    BOOST_TEST(out->find("flight records of 3 of 3 members in " + h.home +
                         "/.lumen/flight/flight-stall.json") !=
                 std::string::npos,
               *out);
  }
  std::ifstream in{h.home + "/.lumen/flight/flight-stall.json"};
  auto doc = nlohmann::json::parse(in, nullptr, false);
  BOOST_REQUIRE(doc.is_object());
  BOOST_TEST(doc["behind"][0]["rank"] == 2);
  BOOST_TEST(doc["behind"][0]["operations_behind"] == 1);
  // The guide's script reads it.
  auto [py, read] =
    lumen::test::run({"/usr/bin/python3", READ_FLIGHT_RECORDS,
                      h.home + "/.lumen/flight/flight-stall.json"});
  BOOST_TEST(py == 0, read);
  BOOST_TEST(read.find("rank 2 of stall (") != std::string::npos, read);
  BOOST_TEST(read.find("): outside for ") != std::string::npos, read);
  BOOST_TEST(read.find("5: allreduce at " + site + ", 4000 bytes, done") !=
               std::string::npos,
             read);
  BOOST_TEST(read.find("rank 2 is 1 operation(s) behind") != std::string::npos,
             read);
  ms[2]->kill(SIGKILL);
}

BOOST_AUTO_TEST_CASE(mismatched_lengths_fail_every_rank_and_the_group_goes_on) {
  head_fixture h;
  auto ms = h.members("mismatch", 3, "mismatch");
  for (auto& m : ms) {
    BOOST_TEST(m->wait() == 0, m->output());
    auto& out = m->output();
    BOOST_TEST(out.find("error: group 'mismatch'") != std::string::npos, out);
    BOOST_TEST(out.find("rank 1 passed 999 float32") != std::string::npos, out);
    // Both sides' call sites: rank 1's, and the other's it was held to.
    auto at = out.find("calling at ");
    BOOST_REQUIRE(at != std::string::npos);
    auto site = out.substr(at + 11, out.find('\n', at) - at - 11);
    BOOST_TEST(out.find("rank 1 called at " + site + " as operation ") !=
                 std::string::npos,
               out);
    auto first = out.find(" called at " + site);
    BOOST_TEST((first != std::string::npos &&
                out.find(" called at " + site, first + 1) != std::string::npos),
               out);
    BOOST_TEST(out.find("recovered") != std::string::npos, out);
  }
}

BOOST_AUTO_TEST_CASE(two_processes_claiming_one_rank_and_a_wrong_size_fail) {
  head_fixture h;
  // Two rank 0s at once: whichever comes second is refused at once; the
  // other waits for a rank 1 that never comes.
  auto a = h.member("claim", 2, 0, "join");
  auto b = h.member("claim", 2, 0, "join");
  BOOST_TEST(a->wait() == 3);
  BOOST_TEST(b->wait() == 3);
  auto claimed = [](process& p) {
    return p.output().find("two members claim it") != std::string::npos;
  };
  BOOST_TEST(claimed(*a) != claimed(*b), a->output() << b->output());
  for (auto* p : {a.get(), b.get()})
    if (!claimed(*p))
      BOOST_TEST(p->output().find("rank(s) 1") != std::string::npos,
                 p->output());
  // Members that disagree on the size both hear it.
  auto two = h.member("sizes", 2, 0, "join");
  auto three = h.member("sizes", 3, 1, "join");
  for (auto* p : {two.get(), three.get()}) {
    BOOST_TEST(p->wait() == 3);
    BOOST_TEST(p->output().find("same world_size") != std::string::npos,
               p->output());
  }
}
