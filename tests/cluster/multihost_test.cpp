// Three hosts in network namespaces this test makes itself: a switch
// namespace with a bridge, and hosts a, b, c each wired to it by a veth
// pair, with addresses of their own (10.201.0.1-3, reachable only inside
// these namespaces). The head runs on a, nodes on b and c, and this program
// runs again inside a as the driver (--driver), which cuts c's link at the
// switch and checks the failure rules. Without root and iproute2 it exits
// 77, which ctest reports as skipped, saying why.

#define BOOST_TEST_MODULE multihost
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>

#include "cluster_job.hpp"
#include "process.hpp"

namespace {

using namespace std::chrono;
using lumen::test::process;

constexpr int skipped = 77;
constexpr auto deadline = seconds(30);

std::string head_address;
std::string token_file;
std::string cut_command;

double seconds_since(steady_clock::time_point t) {
  return duration<double>(steady_clock::now() - t).count();
}

std::set<std::string> ids(bool alive) {
  std::set<std::string> out;
  for (auto& n : lumen::nodes())
    if (n.alive == alive)
      out.insert(n.id);
  return out;
}

struct driver_fixture {
  driver_fixture() {
    lumen::init_options opts;
    opts.address = head_address;
    opts.token_file = token_file;
    lumen::init(opts);
  }
  ~driver_fixture() {
    lumen::shutdown();
  }
};

} // namespace

BOOST_TEST_GLOBAL_FIXTURE(driver_fixture);

BOOST_AUTO_TEST_SUITE(multihost)

BOOST_AUTO_TEST_CASE(work_runs_on_all_three_hosts) {
  BOOST_TEST((ids(true) == std::set<std::string>{"head", "node-1", "node-2"}));
  for (auto& n : lumen::nodes())
    BOOST_TEST(n.address.rfind("10.201.0.", 0) == 0, n.address);
  for (auto id : {"head", "node-1", "node-2"})
    BOOST_TEST(lumen::get(lumen::task(where).on_node(id).remote(), deadline) ==
               id);
  auto c = lumen::actor<Counter>(1).on_node("node-2").remote();
  BOOST_TEST(lumen::get(c.call(&Counter::add, 1), deadline) == 2);
  auto big = lumen::put(std::vector<float>(1 << 20, 0.5f));
  BOOST_TEST(lumen::get(lumen::task(sum).on_node("node-1").remote(big),
                        deadline) == 524288.0);
}

BOOST_AUTO_TEST_CASE(a_cut_link_fails_the_hosts_work_within_two_seconds) {
  auto victim = std::string{"node-2"};
  auto actor = lumen::actor<Counter>(0).on_node(victim).remote();
  BOOST_TEST(lumen::get(actor.call(&Counter::node), deadline) == victim);
  auto call = actor.call(&Counter::nap, 60000);
  auto pinned = lumen::task(busy).on_node(victim).remote(60000);
  std::vector<lumen::ObjectRef<std::string>> spread;
  for (int i = 0; i < 6; ++i)
    spread.push_back(
      lumen::task(busy_on).spread().with_max_retries(3).remote(victim));
  BOOST_TEST(
    !lumen::wait(std::vector{pinned}, 1, milliseconds(300)).pending.empty());
  auto cut_at = steady_clock::now();
  BOOST_REQUIRE(std::system(cut_command.c_str()) == 0);

  BOOST_CHECK_THROW(lumen::get(call, deadline), lumen::actor_died);
  BOOST_TEST(seconds_since(cut_at) < 2.0);
  BOOST_CHECK_THROW(lumen::get(pinned, deadline), lumen::actor_died);
  BOOST_TEST(seconds_since(cut_at) < 2.0);
  bool dead = false;
  while (!dead && seconds_since(cut_at) < 2.0)
    dead = ids(false).count(victim) > 0;
  BOOST_TEST(dead);
  for (auto& place : lumen::get(spread, deadline))
    BOOST_TEST(place != victim);
  BOOST_TEST(lumen::get(lumen::task(where).on_node("node-1").remote(),
                        deadline) == "node-1");
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// Runs a shell command; throws with its output if it fails.
void sh(const std::string& cmd) {
  auto [code, out] = lumen::test::run({"/bin/sh", "-c", cmd + " 2>&1"});
  if (code != 0)
    throw std::runtime_error("`" + cmd + "` failed: " + out);
}

bool can_make_namespaces(std::string& why) {
  if (::geteuid() != 0) {
    why = "it needs root";
    return false;
  }
  if (lumen::test::run({"/bin/sh", "-c", "command -v ip"}).first != 0) {
    why = "it needs iproute2 (apt-get install iproute2)";
    return false;
  }
  auto probe = "lmprobe" + std::to_string(::getpid());
  auto [code, out] = lumen::test::run(
    {"/bin/sh", "-c",
     "ip netns add " + probe + " 2>&1 && ip netns del " + probe + " 2>&1"});
  if (code != 0) {
    why = "this machine does not allow network namespaces (" + out + ")";
    return false;
  }
  return true;
}

/// The namespaces and links of one run; torn down in the destructor.
struct topology {
  std::string tag = std::to_string(::getpid());
  std::string sw = "lm" + tag + "s";
  std::vector<std::string> hosts{"lm" + tag + "a", "lm" + tag + "b",
                                 "lm" + tag + "c"};

  topology() {
    sh("ip netns add " + sw);
    sh("ip -n " + sw + " link add br0 type bridge");
    sh("ip -n " + sw + " link set br0 up");
    for (size_t i = 0; i < hosts.size(); ++i) {
      auto& h = hosts[i];
      auto port = "p" + tag + static_cast<char>('a' + i);
      sh("ip netns add " + h);
      sh("ip -n " + sw + " link add " + port + " type veth peer name eth0" +
         " netns " + h);
      sh("ip -n " + sw + " link set " + port + " master br0");
      sh("ip -n " + sw + " link set " + port + " up");
      sh("ip -n " + h + " addr add " + address(i) + "/24 dev eth0");
      sh("ip -n " + h + " link set eth0 up");
      sh("ip -n " + h + " link set lo up");
    }
  }

  ~topology() {
    for (auto& h : hosts)
      lumen::test::run({"/bin/sh", "-c", "ip netns del " + h});
    lumen::test::run({"/bin/sh", "-c", "ip netns del " + sw});
  }

  static std::string address(size_t i) {
    return "10.201.0." + std::to_string(i + 1);
  }

  std::string cut(size_t i) const {
    return "ip -n " + sw + " link set p" + tag + static_cast<char>('a' + i) +
           " down";
  }
};

std::unique_ptr<process> start_in(const std::string& ns,
                                  std::vector<std::string> args,
                                  const std::string& home,
                                  std::string& address) {
  std::vector<std::string> argv{
    "/usr/sbin/ip", "netns",      "exec",    ns,
    LUMEN_CLI,      "start",      "--block", "--code-path",
    CLUSTER_JOB,    "--num-cpus", "2"};
  if (::access(argv[0].c_str(), X_OK) != 0)
    argv[0] = "/sbin/ip";
  argv.insert(argv.end(), args.begin(), args.end());
  auto p =
    std::make_unique<process>(argv, std::vector<std::string>{"HOME=" + home});
  auto out = p->await_output("(pid", seconds(30));
  auto s = out ? lumen::test::parse_started(*out) : std::nullopt;
  if (!s)
    throw std::runtime_error("a node did not start in " + ns + ": " +
                             p->output());
  address = s->address;
  return p;
}

int run_controller(const char* self) {
  std::string why;
  if (!can_make_namespaces(why)) {
    std::cout << "SKIPPED: the multi-host test cannot run here: " << why
              << "\n";
    return skipped;
  }
  char tmpl[] = "/tmp/lumen-multihost-XXXXXX";
  std::string home = ::mkdtemp(tmpl);
  auto token = home + "/token";
  topology net;
  std::string head, ignored;
  auto h = start_in(net.hosts[0],
                    {"--head", "--host", topology::address(0), "--port", "0",
                     "--token-file", token},
                    home, head);
  auto b = start_in(
    net.hosts[1],
    {"--address", head, "--host", topology::address(1), "--token-file", token},
    home, ignored);
  auto c = start_in(
    net.hosts[2],
    {"--address", head, "--host", topology::address(2), "--token-file", token},
    home, ignored);
  std::string ip =
    ::access("/usr/sbin/ip", X_OK) == 0 ? "/usr/sbin/ip" : "/sbin/ip";
  process driver{{ip, "netns", "exec", net.hosts[0], self, "--driver", head,
                  token, net.cut(2)}};
  driver.await_output(std::string(1, '\0'), minutes(5));
  auto code = driver.wait();
  std::cout << driver.output();
  c->kill(SIGKILL);
  b->kill(SIGTERM);
  h->kill(SIGTERM);
  return code;
}

} // namespace

int main(int argc, char** argv) {
  if (argc >= 5 && std::string{argv[1]} == "--driver") {
    head_address = argv[2];
    token_file = argv[3];
    cut_command = argv[4];
    char* args[] = {argv[0], nullptr};
    return boost::unit_test::unit_test_main(&init_unit_test, 1, args);
  }
  try {
    return run_controller(argv[0]);
  } catch (const std::exception& e) {
    std::cerr << "multihost: " << e.what() << "\n";
    return 1;
  }
}
