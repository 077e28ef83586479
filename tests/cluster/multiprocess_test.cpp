#define BOOST_TEST_MODULE multiprocess
#include <boost/test/unit_test.hpp>

// A real cluster on loopback: a head and two nodes as `lumen start --block`
// processes that load the job library, this test as the driver. One test
// starts a third node and kills it with SIGKILL.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <lumen/caf_interop.hpp>
#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>

#include "cluster_job.hpp"
#include "process.hpp"

namespace {

using lumen::test::process;
using namespace std::chrono;

constexpr auto deadline = seconds(30);

struct started_node {
  std::unique_ptr<process> proc;
  std::string id;
  std::string address;
};

std::string make_temp_dir() {
  char tmpl[] = "/tmp/lumen-cluster-XXXXXX";
  auto dir = ::mkdtemp(tmpl);
  BOOST_REQUIRE(dir != nullptr);
  return dir;
}

/// The whole cluster, shared by the tests of this binary.
struct cluster {
  std::string home = make_temp_dir();
  std::string token_file = home + "/token";
  started_node head;
  std::vector<started_node> nodes;

  std::vector<std::string> env() const {
    return {"HOME=" + home};
  }

  started_node start(std::vector<std::string> extra) {
    std::vector<std::string> argv{LUMEN_CLI, "start", "--block",
                                  "--token-file", token_file,
                                  "--code-path", CLUSTER_JOB,
                                  "--num-cpus", "2"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = std::make_unique<process>(argv, env());
    auto out = p->await_output("(pid", seconds(30));
    BOOST_REQUIRE_MESSAGE(out, "node did not start: " << p->output());
    auto s = lumen::test::parse_started(*out);
    BOOST_REQUIRE(s);
    return {std::move(p), s->id, s->address};
  }

  cluster() {
    head = start({"--head", "--port", "0"});
    nodes.push_back(start({"--address", head.address}));
    nodes.push_back(start({"--address", head.address}));
    lumen::init_options opts;
    opts.address = head.address;
    opts.token_file = token_file;
    lumen::init(opts);
  }

  ~cluster() {
    lumen::shutdown();
    for (auto& n : nodes)
      n.proc->kill(SIGTERM);
    head.proc->kill(SIGTERM);
  }
};

cluster* the_cluster = nullptr;

struct cluster_fixture {
  cluster_fixture() : c(std::make_unique<cluster>()) {
    the_cluster = c.get();
  }
  ~cluster_fixture() {
    the_cluster = nullptr;
  }
  std::unique_ptr<cluster> c;
};

std::set<std::string> ids(const std::vector<lumen::node_info>& ns,
                          bool alive) {
  std::set<std::string> out;
  for (auto& n : ns)
    if (n.alive == alive)
      out.insert(n.id);
  return out;
}

/// Gone, or a zombie nobody reaped yet.
bool process_gone(pid_t pid) {
  std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
  std::string line;
  if (!std::getline(stat, line))
    return true;
  auto paren = line.rfind(')');
  return paren + 2 < line.size() && line[paren + 2] == 'Z';
}

double seconds_since(steady_clock::time_point t) {
  return duration<double>(steady_clock::now() - t).count();
}

} // namespace

BOOST_TEST_GLOBAL_FIXTURE(cluster_fixture);

BOOST_AUTO_TEST_SUITE(multiprocess)

BOOST_AUTO_TEST_CASE(nodes_lists_the_head_and_both_nodes_alive) {
  auto ns = lumen::nodes();
  BOOST_TEST((ids(ns, true) == std::set<std::string>{"head", "node-1",
                                                      "node-2"}));
  BOOST_TEST(lumen::this_node_id().rfind("driver-", 0) == 0);
}

BOOST_AUTO_TEST_CASE(tasks_run_on_the_node_they_are_placed_on) {
  for (auto id : {"head", "node-1", "node-2"})
    BOOST_TEST(lumen::get(lumen::task(where).on_node(id).remote(), deadline)
               == id);
  BOOST_TEST(lumen::get(lumen::task(where).remote()) == lumen::this_node_id());
}

BOOST_AUTO_TEST_CASE(spread_tasks_reach_every_live_node) {
  std::vector<lumen::ObjectRef<std::string>> refs;
  for (int i = 0; i < 30; ++i)
    refs.push_back(lumen::task(where).spread().remote());
  auto places = lumen::get(refs, deadline);
  std::set<std::string> seen(places.begin(), places.end());
  BOOST_TEST((seen == std::set<std::string>{"head", "node-1", "node-2"}));
}

BOOST_AUTO_TEST_CASE(object_refs_cross_nodes) {
  auto a = lumen::task(add).on_node("node-1").remote(1, 2);
  auto b = lumen::task(add).on_node("node-2").remote(a, 10);
  BOOST_TEST(lumen::get(b, deadline) == 13);
  auto big = lumen::put(std::vector<float>(1 << 20, 0.5f));
  BOOST_TEST(lumen::get(lumen::task(sum).on_node("node-2").remote(big),
                        deadline)
             == 524288.0);
}

BOOST_AUTO_TEST_CASE(work_on_a_node_sends_its_own_refs_to_another_node) {
  BOOST_TEST(lumen::get(lumen::task(relay).on_node("node-1").remote("node-2",
                                                                    1000),
                        deadline)
             == 1000.0);
  BOOST_TEST(lumen::get(lumen::task(relay).on_node("head").remote("node-1",
                                                                  10),
                        deadline)
             == 10.0);
}

BOOST_AUTO_TEST_CASE(remote_exceptions_carry_type_message_and_node) {
  try {
    lumen::get(lumen::task(fails).on_node("node-1").remote(5), deadline);
    BOOST_FAIL("get did not throw");
  } catch (const lumen::task_error& e) {
    BOOST_TEST(e.function() == "fails");
    BOOST_TEST(e.exception_type() == "std::invalid_argument");
    BOOST_TEST(e.message() == "bad input 5");
    BOOST_TEST(e.node() == "node-1");
  }
}

BOOST_AUTO_TEST_CASE(an_unknown_node_is_a_usage_error) {
  BOOST_CHECK_EXCEPTION(
    lumen::get(lumen::task(where).on_node("node-99").remote(), deadline),
    lumen::usage_error, [](const lumen::usage_error& e) {
      return std::string{e.what()}.find("node-99") != std::string::npos;
    });
}

BOOST_AUTO_TEST_CASE(actors_live_on_their_node_and_keep_call_order) {
  auto c = lumen::actor<Counter>(0).on_node("node-2").remote();
  BOOST_TEST(lumen::get(c.call(&Counter::node), deadline) == "node-2");
  std::vector<lumen::ObjectRef<int>> refs;
  for (int i = 0; i < 2000; ++i)
    refs.push_back(c.call(&Counter::add, 1));
  auto values = lumen::get(refs, deadline);
  for (int i = 0; i < 2000; ++i)
    BOOST_TEST_REQUIRE(values[i] == i + 1);
  // A ref argument produced on another node holds back later calls.
  auto slow = lumen::task(busy).on_node("node-1").remote(200);
  auto first = c.call(&Counter::add, slow);
  auto second = c.call(&Counter::add, 1);
  BOOST_TEST(lumen::get(first, deadline) == 2200);
  BOOST_TEST(lumen::get(second, deadline) == 2201);
}

BOOST_AUTO_TEST_CASE(a_remote_method_that_throws_fails_only_that_call) {
  auto c = lumen::actor<Counter>(5).on_node("node-1").remote();
  BOOST_CHECK_EXCEPTION(lumen::get(c.call(&Counter::fail), deadline),
                        lumen::task_error, [](const lumen::task_error& e) {
                          return e.function() == "Counter::fail"
                                 && e.node() == "node-1"
                                 && e.message() == "counter overflow";
                        });
  BOOST_TEST(lumen::get(c.call(&Counter::add, 1), deadline) == 6);
}

BOOST_AUTO_TEST_CASE(named_actors_are_found_by_other_scripts) {
  auto& cl = *the_cluster;
  auto shared
    = lumen::actor<Counter>(100).on_node("node-1").with_name("shared").remote();
  BOOST_TEST(lumen::get(shared.call(&Counter::add, 0), deadline) == 100);
  auto [code, out] = lumen::test::run(
    {SECOND_DRIVER, cl.head.address, cl.token_file}, cl.env());
  BOOST_TEST(code == 0, out);
  BOOST_TEST(out.find("node=node-1") != std::string::npos, out);
  BOOST_TEST(out.find("value=105") != std::string::npos, out);
  BOOST_TEST(out.find("clash refused") != std::string::npos, out);
  BOOST_TEST(out.find("already exists") != std::string::npos, out);
  BOOST_TEST(out.find("nobody missing") != std::string::npos, out);
  // The other script's shutdown left the actor alone.
  BOOST_TEST(lumen::get(shared.call(&Counter::add, 1), deadline) == 106);
  auto status = lumen::test::run({LUMEN_CLI, "status", "--address",
                                  cl.head.address, "--token-file",
                                  cl.token_file},
                                 cl.env());
  auto row = lumen::test::status_row(status.second, "node-1");
  BOOST_REQUIRE(row.size() > 3);
  BOOST_TEST(std::stoi(row[3]) >= 1, status.second);
  lumen::kill(shared);
}

BOOST_AUTO_TEST_CASE(typed_actors_spawn_on_other_nodes_by_name) {
  auto calc = lumen::spawn_on<calculator>("node-2", "calculator");
  BOOST_CHECK(calc->node() != lumen::system().node());
  BOOST_TEST(lumen::get(lumen::call(calc, add_atom::value, 2, 3), deadline)
             == 5);
  auto here = lumen::spawn_on<calculator>(lumen::this_node_id(), "calculator");
  BOOST_TEST(lumen::get(lumen::call(here, add_atom::value, 1, 1), deadline)
             == 2);
  BOOST_CHECK_EXCEPTION(lumen::spawn_on<calculator>("node-1", "no-such-actor"),
                        lumen::usage_error, [](const lumen::usage_error& e) {
                          return std::string{e.what()}.find("LUMEN_TYPED_ACTOR")
                                 != std::string::npos;
                        });
  BOOST_CHECK_THROW(lumen::spawn_on<calculator>("node-99", "calculator"),
                    lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(killed_remote_actors_fail_later_calls) {
  auto c = lumen::actor<Counter>(0).on_node("node-1").remote();
  BOOST_TEST(lumen::get(c.call(&Counter::add, 1), deadline) == 1);
  lumen::kill(c);
  BOOST_CHECK_THROW(lumen::get(c.call(&Counter::add, 1), deadline),
                    lumen::actor_died);
}

BOOST_AUTO_TEST_CASE(killing_a_node_fails_its_work_fast_and_marks_it_dead) {
  auto& cl = *the_cluster;
  auto victim = cl.start({"--address", cl.head.address});
  auto actor = lumen::actor<Counter>(0).on_node(victim.id).remote();
  BOOST_TEST(lumen::get(actor.call(&Counter::node), deadline) == victim.id);
  auto call = actor.call(&Counter::nap, 60000);
  auto phoenix
    = lumen::actor<Counter>(7).on_node(victim.id).with_max_restarts(1).remote();
  auto phoenix_call = phoenix.call(&Counter::nap, 60000);
  auto pinned = lumen::task(busy).on_node(victim.id).remote(60000);
  auto silent = lumen::spawn_on<silent_actor>(victim.id, "silent");
  auto typed_call = lumen::call(silent, ask_atom::value);
  std::vector<lumen::ObjectRef<std::string>> spread;
  for (int i = 0; i < 8; ++i)
    spread.push_back(lumen::task(busy_on).spread().with_max_retries(3).remote(
      victim.id));
  // Everything has reached the victim once its busy tasks are running.
  BOOST_TEST(!lumen::wait(std::vector{pinned}, 1, milliseconds(300))
                .pending.empty());
  auto killed_at = steady_clock::now();
  victim.proc->kill(SIGKILL);

  BOOST_CHECK_THROW(lumen::get(call, deadline), lumen::actor_died);
  BOOST_TEST(seconds_since(killed_at) < 2.0);
  BOOST_CHECK_THROW(lumen::get(pinned, deadline), lumen::actor_died);
  BOOST_TEST(seconds_since(killed_at) < 2.0);
  BOOST_CHECK_THROW(lumen::get(typed_call, deadline), lumen::actor_died);
  BOOST_TEST(seconds_since(killed_at) < 2.0);

  // The head marks the node dead within 2 s.
  bool dead = false;
  while (!dead && seconds_since(killed_at) < 2.0)
    dead = ids(lumen::nodes(), false).count(victim.id) > 0;
  BOOST_TEST(dead);

  // An actor with restarts left is rebuilt on a live node: the call it was
  // running fails, later calls reach the new instance.
  BOOST_CHECK_THROW(lumen::get(phoenix_call, deadline), lumen::actor_died);
  auto reborn_on = lumen::get(phoenix.call(&Counter::node), deadline);
  BOOST_TEST(reborn_on != victim.id);
  BOOST_TEST(lumen::get(phoenix.call(&Counter::add, 1), deadline) == 8);
  BOOST_TEST(phoenix.num_restarts() == 1);
  BOOST_TEST(phoenix.alive());
  BOOST_TEST(!actor.alive());

  // Spread tasks caught on the victim ran again elsewhere.
  for (auto& place : lumen::get(spread, deadline))
    BOOST_TEST(place != victim.id);
  BOOST_CHECK_THROW(lumen::get(actor.call(&Counter::add, 1), deadline),
                    lumen::actor_died);

  auto [code, out] = lumen::test::run(
    {LUMEN_CLI, "status", "--address", cl.head.address, "--token-file",
     cl.token_file},
    cl.env());
  BOOST_TEST(code == 0);
  BOOST_TEST(lumen::test::status_of(out, victim.id) == "dead", out);
  BOOST_TEST(lumen::get(lumen::task(where).on_node("node-1").remote(),
                        deadline)
             == "node-1");

  // A node started again joins as a new node and takes work.
  auto again = cl.start({"--address", cl.head.address});
  BOOST_TEST(again.id != victim.id);
  BOOST_TEST(lumen::get(lumen::task(where).on_node(again.id).remote(),
                        deadline)
             == again.id);
  again.proc->kill(SIGTERM);
}

BOOST_AUTO_TEST_CASE(a_wrong_token_is_refused_on_both_sides) {
  auto& cl = *the_cluster;
  auto wrong = cl.home + "/wrong-token";
  std::ofstream{wrong} << "not-the-token\n";
  auto [code, out] = lumen::test::run(
    {LUMEN_CLI, "status", "--address", cl.head.address, "--token-file",
     wrong},
    cl.env());
  BOOST_TEST(code == 1);
  BOOST_TEST(out.find("wrong cluster token") != std::string::npos, out);
  auto node = lumen::test::run({LUMEN_CLI, "start", "--block", "--address",
                                cl.head.address, "--token-file", wrong},
                               cl.env());
  BOOST_TEST(node.first == 1);
  BOOST_TEST(node.second.find("wrong cluster token") != std::string::npos,
             node.second);
  BOOST_TEST(cl.head.proc->await_output("refused client", seconds(5))
               .has_value());
  BOOST_TEST(cl.head.proc->await_output("refused node", seconds(5))
               .has_value());
}

/// A connection to `address` on loopback; -1 if it cannot be made.
int connect_to(const std::string& address) {
  auto colon = address.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port
    = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{15, 0}; // a bound on every read below
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

/// Sends junk to `address` and connects-and-leaves, 10 times each.
void throw_junk_at(const std::string& address) {
  std::mt19937 rng{42};
  for (int round = 0; round < 20; ++round) {
    int fd = connect_to(address);
    BOOST_REQUIRE(fd >= 0);
    if (round % 2 == 0) { // junk; odd rounds just connect and leave
      std::vector<char> junk(1 << 16);
      for (auto& b : junk)
        b = static_cast<char>(rng());
      auto sent = ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
      static_cast<void>(sent);
    }
    ::close(fd);
  }
}

/// The data plane's frame header (runtime/src/data_plane.hpp).
struct frame_header {
  uint32_t magic = 0x314e4d4c;
  uint8_t kind;
  uint8_t ok = 1;
  uint16_t reserved = 0;
  uint64_t id = 1;
  uint64_t length;
};

/// True once the peer closed `fd` (reads return 0), within its timeout.
bool closed_by_peer(int fd) {
  char buf[256];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0)
      return true;
    if (n < 0)
      return false;
  }
}

BOOST_AUTO_TEST_CASE(the_data_port_refuses_strangers_without_harm) {
  auto& cl = *the_cluster;
  std::string data;
  for (auto& n : lumen::nodes())
    if (n.id == "head")
      data = n.data_address;
  BOOST_REQUIRE(!data.empty());
  // A well-formed header claiming 64 GiB, before any token: dropped,
  // nothing allocated.
  int huge = connect_to(data);
  BOOST_REQUIRE(huge >= 0);
  frame_header h{};
  h.kind = 1; // hello
  h.length = uint64_t{1} << 36;
  BOOST_REQUIRE(::send(huge, &h, sizeof(h), MSG_NOSIGNAL) == sizeof(h));
  BOOST_TEST(closed_by_peer(huge));
  ::close(huge);
  // A wrong token: refused, with the reason.
  int wrong = connect_to(data);
  std::string token = "not-the-token";
  h.length = token.size();
  ::send(wrong, &h, sizeof(h), MSG_NOSIGNAL);
  ::send(wrong, token.data(), token.size(), MSG_NOSIGNAL);
  frame_header reply{};
  BOOST_REQUIRE(::recv(wrong, &reply, sizeof(reply), MSG_WAITALL)
                == sizeof(reply));
  BOOST_TEST(reply.kind == 3); // refused
  std::string why(reply.length, '\0');
  ::recv(wrong, why.data(), why.size(), MSG_WAITALL);
  BOOST_TEST(why == "wrong cluster token");
  ::close(wrong);
  BOOST_TEST(cl.head.proc->await_output("refused a data connection",
                                        seconds(5))
               .has_value());
  // A peer that connects and stays silent is let go after the handshake
  // timeout, and others are served meanwhile.
  int silent = connect_to(data);
  BOOST_TEST(lumen::get(lumen::task(where).on_node("head").remote(), deadline)
             == "head");
  BOOST_TEST(closed_by_peer(silent));
  ::close(silent);
  BOOST_TEST(cl.head.proc->running());
}

BOOST_AUTO_TEST_CASE(a_peer_without_the_token_can_neither_spawn_nor_ask) {
  auto& cl = *the_cluster;
  auto colon = cl.head.address.rfind(':');
  auto [code, out] = lumen::test::run({STRANGER,
                                       cl.head.address.substr(0, colon),
                                       cl.head.address.substr(colon + 1)});
  BOOST_TEST(code == 0, out);
  BOOST_TEST(out.find("remote_spawn: refused") != std::string::npos, out);
  BOOST_TEST(out.find("directory: refused") != std::string::npos, out);
  BOOST_TEST(out.find("ALLOWED") == std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(junk_bytes_and_port_scans_leave_the_head_working) {
  auto& cl = *the_cluster;
  throw_junk_at(cl.head.address); // the control port (CAF)
  for (auto& n : lumen::nodes())
    if (n.id == "head")
      throw_junk_at(n.data_address); // the data port
  BOOST_TEST(cl.head.proc->running());
  BOOST_TEST(ids(lumen::nodes(), true).count("head") == 1);
  BOOST_TEST(lumen::get(lumen::task(where).on_node("head").remote(), deadline)
             == "head");
}

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
                   cl.token_file})
             == 1);
}

BOOST_AUTO_TEST_CASE(background_nodes_start_report_and_stop) {
  // A home of its own: `lumen stop` ends the nodes recorded there, which
  // are exactly the two this test starts.
  auto home = make_temp_dir();
  std::vector<std::string> env{"HOME=" + home};
  auto [head_code, head_out] = lumen::test::run(
    {LUMEN_CLI, "start", "--head", "--port", "0"}, env);
  BOOST_REQUIRE_MESSAGE(head_code == 0, head_out);
  auto head = lumen::test::parse_started(head_out);
  BOOST_REQUIRE(head);
  auto address = head->address;
  auto head_pid = head->pid;
  struct stat st{};
  BOOST_REQUIRE(::stat((home + "/.lumen/cluster-token").c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0600u);
  auto [node_code, node_out] = lumen::test::run(
    {LUMEN_CLI, "start", "--address", address}, env);
  BOOST_REQUIRE_MESSAGE(node_code == 0, node_out);
  auto node = lumen::test::parse_started(node_out);
  BOOST_REQUIRE(node);
  auto node_pid = node->pid;
  auto [status_code, status_out] = lumen::test::run(
    {LUMEN_CLI, "status", "--address", address}, env);
  BOOST_TEST(status_code == 0);
  BOOST_TEST(lumen::test::status_of(status_out, "node-1") == "alive",
             status_out);
  auto [stop_code, stop_out] = lumen::test::run({LUMEN_CLI, "stop"}, env);
  BOOST_TEST(stop_code == 0);
  BOOST_TEST(stop_out.find("Stopped 2 nodes") != std::string::npos, stop_out);
  BOOST_TEST(process_gone(head_pid));
  BOOST_TEST(process_gone(node_pid));
}

BOOST_AUTO_TEST_SUITE_END()
