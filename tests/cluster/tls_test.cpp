#define BOOST_TEST_MODULE tls
#include <boost/test/unit_test.hpp>

// A cluster whose links run over TLS keyed by the token (`--tls`): work
// crosses it as on a plain one, processes without TLS are told to use it,
// and someone reading the wire sees neither the token nor the directory; a
// flood of strangers keeps no peer with the token out.
// Certificates are tried on a head of their own.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include <lumen/caf_interop.hpp>

#include "certificates.hpp"
#include "cluster_fixture.hpp"
#include "cluster_job.hpp"
#include "wiretap.hpp"

using namespace lumen::test;

namespace {

lumen::tls_options token_keyed() {
  lumen::tls_options o;
  o.enabled = true;
  return o;
}

struct tls_cluster : cluster_fixture {
  tls_cluster()
    : cluster_fixture(token_keyed()) {}
};

std::string read_file(const std::string& path) {
  std::ifstream in{path};
  std::string s;
  std::getline(in, s);
  return s;
}

std::string port_of(const std::string& address) {
  return address.substr(address.rfind(':') + 1);
}

} // namespace

BOOST_TEST_GLOBAL_FIXTURE(tls_cluster);

BOOST_AUTO_TEST_SUITE(tls)

BOOST_AUTO_TEST_CASE(work_crosses_every_node_over_tls) {
  for (auto id : {"head", "node-1", "node-2"})
    BOOST_TEST(lumen::get(lumen::task(where).on_node(id).remote(), deadline) ==
               id);
  auto big = lumen::put(std::vector<float>(1 << 20, 0.5f));
  BOOST_TEST(lumen::get(lumen::task(sum).on_node("node-2").remote(big),
                        deadline) == 524288.0);
  auto c = lumen::actor<Counter>(10).on_node("node-1").remote();
  BOOST_TEST(lumen::get(c.call(&Counter::add, 5), deadline) == 15);
  // Typed actors talk over CAF's middleman: the control plane's relay.
  auto calc = lumen::spawn_on<calculator>("node-2", "calculator");
  BOOST_TEST(lumen::get(lumen::call(calc, add_atom::value, 2, 3), deadline) ==
             5);
}

BOOST_AUTO_TEST_CASE(named_actors_reach_another_script_over_tls) {
  auto& cl = *the_cluster;
  auto shared =
    lumen::actor<Counter>(0).with_name("shared").on_node("node-1").remote();
  BOOST_TEST(lumen::get(shared.call(&Counter::add, 1), deadline) == 1);
  auto env = cl.env();
  env.push_back("LUMEN_TLS=1");
  auto [code, out] = run({SECOND_DRIVER, cl.head.address, cl.token_file}, env);
  BOOST_TEST(code == 0, out);
  BOOST_TEST(out.find("node=node-1") != std::string::npos, out);
  BOOST_TEST(out.find("value=6") != std::string::npos, out);
  lumen::kill(shared);
}

BOOST_AUTO_TEST_CASE(a_process_without_tls_is_told_to_use_it) {
  auto& cl = *the_cluster;
  auto status = run({LUMEN_CLI, "status", "--address", cl.head.address,
                     "--token-file", cl.token_file},
                    cl.env());
  BOOST_TEST(status.first == 1);
  BOOST_TEST(status.second.find("pass --tls") != std::string::npos,
             status.second);
  auto node = run({LUMEN_CLI, "start", "--block", "--address", cl.head.address,
                   "--token-file", cl.token_file},
                  cl.env());
  BOOST_TEST(node.first == 1);
  BOOST_TEST(node.second.find("pass --tls") != std::string::npos, node.second);
  // And the cluster does not notice.
  auto [code, out] = cl.status();
  BOOST_TEST(code == 0, out);
  BOOST_TEST(status_of(out, "node-1") == "alive", out);
}

BOOST_AUTO_TEST_CASE(a_flood_of_strangers_keeps_no_peer_with_the_token_out) {
  auto& cl = *the_cluster;
  auto port = static_cast<uint16_t>(std::stoi(port_of(cl.head.address)));
  // Strangers: connections opened as fast as five threads can, each
  // sending the start of a TLS record (four threads) or nothing (the
  // fifth) and then nothing while its thread's next 200 open (a handshake
  // the gate waits for), then reset; to this machine's loopback only, for
  // 20 s or 200,000 connections at most, stopping once the peers below are
  // done.
  std::atomic<bool> done{false};
  std::atomic<int> opened{0};
  std::vector<std::thread> flood;
  for (int t = 0; t < 5; ++t)
    flood.emplace_back([&, silent = t == 4] {
      std::vector<int> held(200, -1);
      auto until = steady_clock::now() + seconds(20);
      for (size_t i = 0;
           !done && opened < 200000 && steady_clock::now() < until; ++i) {
        auto& slot = held[i % held.size()];
        if (slot >= 0)
          ::close(slot);
        slot = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(port);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        linger reset{1, 0}; // no TIME_WAIT: the ports last the flood
        ::setsockopt(slot, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        // The start of a TLS record, the rest of which never comes.
        const char hello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};
        if (::connect(slot, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0 &&
            (silent || ::send(slot, hello, sizeof hello, MSG_NOSIGNAL) > 0))
          ++opened;
      }
      for (auto fd : held)
        if (fd >= 0)
          ::close(fd);
    });
  BOOST_TEST_REQUIRE(eventually([&] { return opened >= 2000; }),
                     "the flood opened only " << opened << " connections");
  // Peers with the token, meanwhile: status calls and nodes joining.
  auto secure = cl.tls_flags();
  for (int i = 0; i < 6; ++i) {
    auto [code, out] = cl.status();
    BOOST_TEST(code == 0, "status " << i << ": " << out);
  }
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> argv{
      LUMEN_CLI,      "start",       "--block",    "--address", cl.head.address,
      "--token-file", cl.token_file, "--num-cpus", "1"};
    argv.insert(argv.end(), secure.begin(), secure.end());
    process node{argv, cl.env()};
    auto out = node.await_output("(pid", seconds(30));
    BOOST_TEST(out.has_value(), "node " << i << ": " << node.output());
    node.kill(SIGTERM);
  }
  // Peers that get in quickly could end the flood before it was one: more
  // status calls until 7,000 strangers knocked (60 at most).
  for (int i = 6; i < 66 && opened < 7000; ++i) {
    auto [code, out] = cl.status();
    BOOST_TEST(code == 0, "status " << i << ": " << out);
  }
  auto strangers = opened.load();
  done = true;
  for (auto& t : flood)
    t.join();
  BOOST_TEST(strangers > 5000, strangers << " strangers");
  BOOST_TEST_MESSAGE(strangers << " strangers knocked meanwhile");
}

BOOST_AUTO_TEST_CASE(the_wire_shows_neither_the_token_nor_the_directory) {
  auto& cl = *the_cluster;
  auto head_port = static_cast<uint16_t>(std::stoi(port_of(cl.head.address)));
  wiretap tap{head_port};
  auto [code, out] = run({LUMEN_CLI, "status", "--address",
                          "127.0.0.1:" + std::to_string(tap.port()),
                          "--token-file", cl.token_file, "--tls"},
                         cl.env());
  BOOST_TEST(code == 0, out);
  BOOST_TEST(out.find("node-2") != std::string::npos, out);
  auto seen = tap.seen();
  BOOST_TEST(seen.size() > 1000u); // the whole conversation went by
  BOOST_TEST(seen.find(read_file(cl.token_file)) == std::string::npos);
  for (auto plain : {"LMNGATE1", "node-1", "node-2", "cpu", "driver"})
    BOOST_TEST(seen.find(plain) == std::string::npos, plain);
}

BOOST_AUTO_TEST_CASE(a_head_with_certificates_lets_in_only_its_ca) {
  auto& cl = *the_cluster;
  auto cert = self_signed("cluster");
  auto head = std::make_unique<process>(
    std::vector<std::string>{LUMEN_CLI, "start", "--block", "--head", "--port",
                             "0", "--token-file", cl.home + "/cert-token",
                             "--tls-cert", cert.cert_file, "--tls-key",
                             cert.key_file},
    cl.env());
  auto started = head->await_output("(pid", seconds(30));
  BOOST_REQUIRE_MESSAGE(started, head->output());
  auto address = parse_started(*started)->address;
  // --tls-ca defaults to the certificate itself: one for the cluster.
  auto ok = run({LUMEN_CLI, "status", "--address", address, "--token-file",
                 cl.home + "/cert-token", "--tls-cert", cert.cert_file,
                 "--tls-key", cert.key_file},
                cl.env());
  BOOST_TEST(ok.first == 0, ok.second);
  BOOST_TEST(ok.second.find("head") != std::string::npos, ok.second);
  auto other = self_signed("stranger");
  auto refused = run({LUMEN_CLI, "status", "--address", address, "--token-file",
                      cl.home + "/cert-token", "--tls-cert", other.cert_file,
                      "--tls-key", other.key_file},
                     cl.env());
  BOOST_TEST(refused.first == 1);
  BOOST_TEST(refused.second.find("--tls-ca") != std::string::npos,
             refused.second);
  // The token alone does not open a certificate cluster.
  auto token_only = run({LUMEN_CLI, "status", "--address", address,
                         "--token-file", cl.home + "/cert-token", "--tls"},
                        cl.env());
  BOOST_TEST(token_only.first == 1, token_only.second);
  auto bad = run({LUMEN_CLI, "status", "--address", address, "--token-file",
                  cl.home + "/cert-token", "--tls-cert", cert.cert_file},
                 cl.env());
  BOOST_TEST(bad.first == 2, bad.second);
  BOOST_TEST(bad.second.find("--tls-key") != std::string::npos, bad.second);
  head->kill(SIGTERM);
}

BOOST_AUTO_TEST_SUITE_END()
