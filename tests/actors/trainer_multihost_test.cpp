// `lumen train fashion-mnist` on three hosts in network namespaces
// (netns.hpp): the head on a, nodes on b and c, the driver on a, a worker
// on each host. Once the first epoch is reported, c's link is cut at the
// switch: c's worker is lost without a word (no reset, no end of stream),
// its peers' channels fail once the kernel's probes go unanswered, and the
// trainer, elastic (--min-workers 2), restarts the group from the last
// checkpoint on the two hosts left, then finishes. Without root and
// iproute2 it exits 77, which ctest reports as skipped.

#define BOOST_TEST_MODULE trainer_multihost
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "netns.hpp"

namespace {

using namespace std::chrono;
using namespace lumen::test;

constexpr int epochs = 6;

/// The rows of metrics.csv, each a list of its cells.
std::vector<std::vector<std::string>> csv_rows(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in{path};
  std::string line;
  std::getline(in, line); // the header
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream s{line};
    for (std::string cell; std::getline(s, cell, ',');)
      cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

} // namespace

BOOST_AUTO_TEST_SUITE(trainer_multihost)

BOOST_AUTO_TEST_CASE(a_cut_link_restarts_the_group_on_the_other_hosts) {
  auto home = fresh_dir("trainer-multihost");
  auto token = home + "/token";
  topology net;
  std::string head, ignored;
  auto h = start_node(net, 0,
                      {"--head", "--host", topology::address(0), "--port", "0",
                       "--token-file", token},
                      home, head);
  auto b = start_node(
    net, 1,
    {"--address", head, "--host", topology::address(1), "--token-file", token},
    home, ignored);
  auto c = start_node(
    net, 2,
    {"--address", head, "--host", topology::address(2), "--token-file", token},
    home, ignored);
  process driver{net.in(0, {LUMEN_CLI,
                            "train",
                            "fashion-mnist",
                            "--address",
                            head,
                            "--token-file",
                            token,
                            "--workers",
                            "3",
                            "--epochs",
                            std::to_string(epochs),
                            "--limit",
                            "9000",
                            "--test-limit",
                            "3000",
                            "--storage",
                            home,
                            "--name",
                            "cut",
                            "--progress",
                            "lines",
                            "--max-failures",
                            "2",
                            "--min-workers",
                            "2"}),
                 {"HOME=" + home}};
  auto first = driver.await_output("epoch   1/", minutes(3));
  BOOST_REQUIRE_MESSAGE(first, "no first epoch: " + driver.output());
  auto cut_at = steady_clock::now();
  sh(net.cut(2));
  driver.await_output(std::string(1, '\0'), minutes(3));
  auto code = driver.wait();
  auto took = duration<double>(steady_clock::now() - cut_at).count();
  auto out = driver.output();
  std::cout << out << "finished " << took << " s after the cut\n";
  c->kill(SIGKILL);
  b->kill(SIGTERM);
  h->kill(SIGTERM);

  BOOST_TEST(code == 0, out);
  BOOST_TEST(out.find("(1 restarts)") != std::string::npos, out);
  // The survivors' collectives name the rank whose host went.
  BOOST_TEST(out.find("rank 2 is gone") != std::string::npos, out);
  BOOST_TEST(out.find("going on from the last checkpoint with 2 workers") !=
               std::string::npos,
             out);
  // Every epoch reported once and in order, none lost to the restart.
  auto rows = csv_rows(home + "/cut/metrics.csv");
  BOOST_REQUIRE(rows.size() == size_t(epochs));
  for (size_t i = 0; i < rows.size(); ++i) {
    BOOST_TEST(std::stoi(rows[i].at(0)) == int(i + 1));
    BOOST_TEST(std::stod(rows[i].at(7)) == 0.0); // drift: replicas agree
  }
  // The accuracy band of an uninterrupted run on 9,000 images (0.82-0.84).
  BOOST_TEST(std::stod(rows.back().at(3)) > 0.80);
}

BOOST_AUTO_TEST_SUITE_END()

int main(int argc, char** argv) {
  std::string why;
  if (!can_make_namespaces(why)) {
    std::cout << "SKIPPED: the multi-host trainer test cannot run here: " << why
              << "\n";
    return skipped;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
