#pragma once

// A real cluster on loopback, shared by the tests of one binary: a head and
// two nodes as `lumen start --block` processes that load the job library,
// and the test itself as the driver.

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>

#include "eventually.hpp"
#include "process.hpp"

namespace lumen::test {

using namespace std::chrono;

constexpr auto deadline = seconds(30);

struct started_node {
  std::unique_ptr<process> proc;
  std::string id;
  std::string address;
};

inline std::string make_temp_dir() {
  char tmpl[] = "/tmp/lumen-cluster-XXXXXX";
  auto dir = ::mkdtemp(tmpl);
  BOOST_REQUIRE(dir != nullptr);
  return dir;
}

/// The whole cluster, shared by the tests of this binary.
struct cluster {
  std::string home = make_temp_dir();
  std::string token_file = home + "/token";
  lumen::tls_options tls; // every process of the cluster uses the same
  started_node head;
  std::vector<started_node> nodes;

  std::vector<std::string> env() const {
    return {"HOME=" + home};
  }

  /// The flags that give a `lumen` process this cluster's TLS setup.
  std::vector<std::string> tls_flags() const {
    if (!tls.cert_file.empty())
      return {"--tls-cert", tls.cert_file, "--tls-key",
              tls.key_file, "--tls-ca",    tls.ca_file};
    if (tls.enabled)
      return {"--tls"};
    return {};
  }

  started_node start(std::vector<std::string> extra,
                     std::vector<std::string> more_env = {}) {
    std::vector<std::string> argv{LUMEN_CLI,      "start",      "--block",
                                  "--token-file", token_file,   "--code-path",
                                  CLUSTER_JOB,    "--num-cpus", "2"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto secure = tls_flags();
    argv.insert(argv.end(), secure.begin(), secure.end());
    auto vars = env();
    vars.insert(vars.end(), more_env.begin(), more_env.end());
    auto p = std::make_unique<process>(argv, vars);
    auto out = p->await_output("(pid", seconds(30));
    BOOST_REQUIRE_MESSAGE(out, "node did not start: " << p->output());
    auto s = parse_started(*out);
    BOOST_REQUIRE(s);
    return {std::move(p), s->id, s->address};
  }

  explicit cluster(lumen::tls_options secure = {})
    : tls(std::move(secure)) {
    head = start({"--head", "--port", "0"});
    nodes.push_back(start({"--address", head.address}));
    // node-2 keeps every byte on its sockets, node-1 shares memory with
    // the processes of this host: the suites run both paths.
    nodes.push_back(
      start({"--address", head.address}, {"LUMEN_SHARED_MEMORY=0"}));
    lumen::init_options opts;
    opts.address = head.address;
    opts.token_file = token_file;
    opts.tls = tls;
    lumen::init(opts);
  }

  ~cluster() {
    lumen::shutdown();
    for (auto& n : nodes)
      n.proc->kill(SIGTERM);
    head.proc->kill(SIGTERM);
  }

  /// `lumen status` against this cluster: exit code and output.
  std::pair<int, std::string> status() const {
    std::vector<std::string> argv{LUMEN_CLI,    "status",       "--address",
                                  head.address, "--token-file", token_file};
    auto secure = tls_flags();
    argv.insert(argv.end(), secure.begin(), secure.end());
    return run(argv, env());
  }
};

inline cluster* the_cluster = nullptr;

struct cluster_fixture {
  explicit cluster_fixture(lumen::tls_options tls = {})
    : c(std::make_unique<cluster>(std::move(tls))) {
    the_cluster = c.get();
  }
  ~cluster_fixture() {
    the_cluster = nullptr;
  }
  std::unique_ptr<cluster> c;
};

inline std::set<std::string> ids(const std::vector<lumen::node_info>& ns,
                                 bool alive) {
  std::set<std::string> out;
  for (auto& n : ns)
    if (n.alive == alive)
      out.insert(n.id);
  return out;
}

/// Gone, or a zombie nobody reaped yet.
inline bool process_gone(pid_t pid) {
  std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
  std::string line;
  if (!std::getline(stat, line))
    return true;
  auto paren = line.rfind(')');
  return paren + 2 < line.size() && line[paren + 2] == 'Z';
}

inline double seconds_since(steady_clock::time_point t) {
  return duration<double>(steady_clock::now() - t).count();
}

} // namespace lumen::test
