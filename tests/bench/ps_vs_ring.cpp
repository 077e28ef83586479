// ps_vs_ring: the seed's fifth practice measured: one synchronous step's
// communication for N workers on hosts of their own, in network
// namespaces whose links are shaped to --rate each way (tc's token bucket,
// 1 Gbit/s: machines on one switch), as the model grows:
//   ring        the ring all-reduce of the S-float gradient (members
//               joined as drivers, one a host)
//   ps_single   one parameter server on a host of its own: every worker
//               pushes its gradient and gets the new weights back
//   ps_sharded  M = N shards, one on each worker's host (Lumen's
//               sharded_server): each push and answer split across them
// beside the closed-form bound of each, from the bytes the busiest link
// carries: a single server's link takes N·S in and sends N·S out, the
// answers one after another, so that a step lasts (N+1)·S / rate (below);
// a ring member's or a co-located shard's host sends and receives
// 2·S·(N-1)/N.
// The workers of the servers are typed actors on cluster nodes, one a
// host, that push as data_parallel_worker does; a step's time is the
// slowest worker's. Prints the table, a JSON object a figure (--json),
// and draws time against model size (--plot=FILE, ps_vs_ring.svg).
//
//   ./.build/tests/bench/ps_vs_ring [--json] [--reps=N] [--workers=2,4,8]
//     [--params=1M,10M,100M] [--rate=1gbit] [--plot=FILE] [--smoke]
//
// Needs root and iproute2 (network namespaces, tc); exits 77 (skipped)
// without them.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/cli.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>
#include <lumen/ml/parameter_server.hpp>
#include <lumen/ml/plot.hpp>
#include <lumen/ml/sharded_server.hpp>
#include <lumen/util/huge_pages.hpp>

#include "allreduce_procs.hpp"
#include "bench_nodes.hpp"
#include "bench_report.hpp"
#include "netns.hpp"
#include "ps_vs_ring_servers.hpp"

namespace ml = lumen::ml;
using clock_type = std::chrono::steady_clock;
using lumen::bench::figure;
using lumen::bench::verify;
using lumen::bench::ps_vs_ring::run_driver;

namespace {

/// `text` as a positive number followed by one of `units` (its scale),
/// or 0 if it is not one.
double scaled(const std::string& text,
              const std::map<std::string, double>& units) {
  size_t used = 0;
  double n = 0;
  try {
    n = std::stod(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  auto unit = units.find(text.substr(used));
  return unit == units.end() || !(n > 0) ? 0 : n * unit->second;
}

/// "1M", "10M", "100M", "256K" or a plain count of parameters.
size_t parameters_of(const std::string& text) {
  auto n = scaled(text, {{"M", 1e6}, {"K", 1e3}, {"", 1}});
  if (n < 1)
    throw std::invalid_argument("'" + text +
                                "' is no parameter count; write 1M, 256K or "
                                "1000000");
  return size_t(n);
}

template <class T, class F>
std::vector<T> list_of(const std::string& text, F parse) {
  std::vector<T> out;
  std::stringstream in{text};
  for (std::string part; std::getline(in, part, ',');)
    out.push_back(parse(part));
  if (out.empty())
    throw std::invalid_argument("an empty list");
  return out;
}

/// Bytes a second of a tc rate: "1gbit", "100mbit".
double bytes_per_second(const std::string& rate) {
  auto bits = scaled(rate, {{"gbit", 1e9}, {"mbit", 1e6}});
  if (bits == 0)
    throw std::invalid_argument("--rate '" + rate +
                                "': write it as tc does, 1gbit or 100mbit");
  return bits / 8;
}

struct settings {
  std::vector<size_t> workers{2, 4, 8};
  std::vector<size_t> params{1000000, 10000000, 100000000};
  std::string rate = "1gbit";
  std::string plot = "ps_vs_ring.svg";
  uint32_t steps = 3;
};

/// The "FIG" lines of `out` as figures of seconds a step.
void read_figures(const std::string& out, std::vector<figure>& figs) {
  std::istringstream lines{out};
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in{line};
    std::string tag, name;
    size_t n = 0, bytes = 0;
    if (!(in >> tag >> name >> n >> bytes) || tag != "FIG")
      continue;
    std::vector<double> seconds;
    if (name == "ring_shaped") {
      // allreduce_procs's members print an algorithm, the best time, then
      // bus bandwidths: each repetition's time from its bandwidth.
      std::string algorithm;
      double t_min = 0;
      in >> algorithm >> t_min;
      for (double busbw; in >> busbw;)
        seconds.push_back(double(bytes) * 2.0 * double(n - 1) / double(n) /
                          (busbw * 1e9));
      name = "ring";
    } else {
      for (double s; in >> s;)
        seconds.push_back(s);
    }
    if (seconds.empty())
      continue;
    figs.emplace_back(name, "s", seconds, long(n), long(bytes));
    auto params = bytes / 4;
    figs.back().label =
      name + " n=" + std::to_string(n) + " " +
      (params % 1000000 == 0 ? std::to_string(params / 1000000) + "M"
       : params % 1000 == 0  ? std::to_string(params / 1000) + "K"
                             : std::to_string(params)) +
      " params";
  }
}

/// One N's measures: the hosts, shaped; a head and a node on each; the
/// ring's members, then the servers' driver.
void measure(const settings& s, const lumen::bench::options& opts, size_t n,
             double rate, std::vector<figure>& figs) {
  auto self = lumen::bench::self_exe();
  char tmpl[] = "/tmp/lumen-ps-vs-ring-XXXXXX";
  std::string home = ::mkdtemp(tmpl);
  auto token = home + "/token";
  lumen::test::topology net{n + 1};
  for (size_t h = 0; h <= n; ++h)
    net.shape(h, s.rate);
  std::string head, ignored;
  std::vector<std::unique_ptr<lumen::test::process>> nodes;
  nodes.push_back(lumen::test::start_program_node(
    net, 0, {self, "--serve"},
    {"--head", "--host", lumen::test::topology::address(0), "--port", "0",
     "--token-file", token, "--num-cpus", "1"},
    home, head));
  for (size_t h = 0; h <= n; ++h)
    nodes.push_back(lumen::test::start_program_node(
      net, h, {self, "--serve"},
      {"--address", head, "--host", lumen::test::topology::address(h),
       "--token-file", token, "--num-cpus", "2"},
      home, ignored));
  std::vector<std::string> sizes;
  for (auto p : s.params)
    sizes.push_back(std::to_string(p * 4));
  // The ring: a member a worker host.
  std::vector<std::unique_ptr<lumen::test::process>> members;
  for (size_t r = 0; r < n; ++r) {
    std::vector<std::string> argv{self,
                                  "--member",
                                  head,
                                  token,
                                  std::to_string(n),
                                  std::to_string(r),
                                  "ring_shaped",
                                  "ring",
                                  std::to_string(opts.reps),
                                  opts.smoke ? "1" : "0"};
    argv.insert(argv.end(), sizes.begin(), sizes.end());
    members.push_back(std::make_unique<lumen::test::process>(
      net.in(1 + r, argv), std::vector<std::string>{"HOME=" + home}));
  }
  for (auto& m : members)
    if (int rc = m->wait(); rc != 0)
      verify(false, "a ring member failed (exit " + std::to_string(rc) +
                      "): " + m->output());
  read_figures(members[0]->output(), figs);
  // The servers, from the first host.
  std::vector<std::string> argv{self,
                                "--driver",
                                head,
                                token,
                                std::to_string(n),
                                std::to_string(s.steps),
                                std::to_string(opts.reps)};
  for (auto p : s.params)
    argv.push_back(std::to_string(p));
  lumen::test::process driver{net.in(0, argv), {"HOME=" + home}};
  // A hang is reported with what the driver said, not waited out: twenty
  // times what the slowest server's steps need, and a minute.
  double need = 60;
  for (auto p : s.params)
    need += 20.0 * 2 * double(n) * double(p) * 4 / rate *
            double((s.steps + 1) * unsigned(opts.reps));
  if (!driver.await_output("DONE", std::chrono::seconds(long(need)))) {
    bool exited = !driver.running();
    if (!exited)
      driver.kill(SIGKILL);
    // A node that ended is why, more often than not: its last words.
    std::string gone;
    for (size_t i = 0; i < nodes.size(); ++i)
      if (!nodes[i]->running()) {
        auto& out = nodes[i]->output();
        gone +=
          "\n" +
          std::string{i == 0 ? "the head"
                             : "the node on host " + std::to_string(i - 1)} +
          " ended (status " + std::to_string(nodes[i]->wait()) +
          "): " + out.substr(out.size() - std::min<size_t>(out.size(), 2000));
      }
    verify(false, (exited ? "the servers' driver exited before it finished: "
                          : "the servers' driver did not finish in " +
                              std::to_string(long(need)) + " s: ") +
                    driver.output() + gone);
  }
  if (int rc = driver.wait(); rc != 0)
    verify(false, "the servers' driver failed (exit " + std::to_string(rc) +
                    "): " + driver.output());
  read_figures(driver.output(), figs);
  // Each N's figures as they come: a long run shows its progress.
  for (auto& f : figs)
    if (size_t(f.n) == n)
      std::fprintf(stderr, "  %-30s median %.4f s\n", f.label.c_str(),
                   f.median());
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    (*it)->kill(SIGTERM);
  for (auto& p : nodes)
    p->wait();
  std::filesystem::remove_all(home);
}

/// Each measured figure's bound beside it, and its ratio to it.
std::vector<figure> with_bounds(std::vector<figure> measured, double rate) {
  std::vector<figure> out;
  for (auto& f : measured) {
    auto size = double(f.bytes), n = double(f.n);
    // The single server: its link takes N·S in and sends N·S out a step,
    // but not both at once within a step (the weights go out once every
    // gradient is in); across steps a worker answered early pushes its
    // next gradient while the others' answers still go out. A step then
    // lasts from one worker's answer to the next's: the N answers one
    // after another on the server's link, and the last worker's push.
    double bytes =
      f.name == "ps_single" ? (n + 1) * size : 2 * size * (n - 1) / n;
    figure bound{f.name + "_bound", "s", {bytes / rate}, f.n, f.bytes};
    bound.label = f.label + " bound";
    bound.extra = {{"formula", f.name == "ps_single"
                                 ? "\"(N+1)·S / rate\""
                                 : "\"2·S·(N-1)/N / rate\""}};
    lumen::bench::compare(f, bound);
    out.push_back(f);
    out.push_back(bound);
  }
  return out;
}

void draw(const std::string& path, const std::vector<figure>& figs, size_t n) {
  std::vector<ml::series> lines;
  for (std::string name : {"ring", "ps_single", "ps_sharded", "ring_bound",
                           "ps_single_bound", "ps_sharded_bound"}) {
    ml::series line{name + " n=" + std::to_string(n), {}, {}};
    for (auto& f : figs)
      if (f.name == name && size_t(f.n) == n) {
        line.x.push_back(double(f.bytes) / 4 / 1e6);
        line.y.push_back(f.median());
      }
    if (!line.x.empty())
      lines.push_back(line);
  }
  if (!lines.empty())
    ml::write_svg_plot(path,
                       "One step's communication, " + std::to_string(n) +
                         " workers on 1 Gbit/s links",
                       "parameters (millions)", "seconds", lines);
}

} // namespace

int main(int argc, char** argv) {
  lumen::util::use_huge_pages();
  if (argc > 1 && std::string{argv[1]} == "--serve")
    return lumen::cli_main(argc - 1, argv + 1);
  if (argc > 1 && std::string{argv[1]} == "--member")
    return lumen::bench::run_member(argc, argv);
  if (argc > 7 && std::string{argv[1]} == "--driver") {
    try {
      return run_driver(argc, argv);
    } catch (const std::exception& e) {
      std::cout << "the driver failed: " << e.what() << std::endl;
      return 1;
    }
  }
  settings s;
  lumen::bench::options opts;
  double rate = 0;
  bool plot_given = false;
  try {
    bool reps_given = false;
    for (int i = 1; i < argc; ++i)
      reps_given = reps_given || std::string{argv[i]}.rfind("--reps=", 0) == 0;
    opts = lumen::bench::parse_options(
      argc, argv,
      "ps_vs_ring: a step's communication, parameter servers against the "
      "ring all-reduce, N workers on shaped links\n"
      "  --workers=2,4,8        workers (a host each)\n"
      "  --params=1M,10M,100M   model sizes, float32 parameters\n"
      "  --rate=1gbit           each link's rate, each way (tc's form)\n"
      "  --plot=FILE            the SVG of the largest N (ps_vs_ring.svg;\n"
      "                         none with --smoke unless given)");
    if (!reps_given && !opts.smoke)
      opts.reps = 3;
    for (auto& flag : opts.rest) {
      auto value = flag.substr(flag.find('=') + 1);
      if (flag.rfind("--workers=", 0) == 0)
        s.workers = list_of<size_t>(value, [](const std::string& t) {
          auto w = scaled(t, {{"", 1}});
          if (w < 2 || w > 8 || w != std::floor(w))
            throw std::invalid_argument("--workers takes 2 to 8 each, not '" +
                                        t + "'");
          return size_t(w);
        });
      else if (flag.rfind("--params=", 0) == 0)
        s.params = list_of<size_t>(value, parameters_of);
      else if (flag.rfind("--rate=", 0) == 0)
        s.rate = value;
      else if (flag.rfind("--plot=", 0) == 0) {
        s.plot = value;
        plot_given = true;
      } else
        throw std::invalid_argument("unknown flag '" + flag + "'; see --help");
    }
    rate = bytes_per_second(s.rate);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps_vs_ring: %s\n", e.what());
    return 2;
  }
  if (opts.smoke) {
    s.workers = {2};
    s.params = {65536};
    s.steps = 2;
    if (!plot_given)
      s.plot.clear();
  }
  std::string why;
  if (!lumen::test::can_make_namespaces(why)) {
    std::printf("ps_vs_ring: skipped: %s\n", why.c_str());
    return lumen::test::skipped;
  }
  std::vector<figure> measured;
  try {
    for (auto n : s.workers) {
      std::fprintf(stderr, "ps_vs_ring: %zu workers\n", n);
      measure(s, opts, n, rate, measured);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps_vs_ring: %s\n", e.what());
    return 1;
  }
  auto figs = with_bounds(measured, rate);
  lumen::bench::print("ps_vs_ring", figs, opts.json);
  if (!s.plot.empty()) {
    draw(s.plot, figs, s.workers.back());
    std::fprintf(stderr, "ps_vs_ring: plot %s\n", s.plot.c_str());
  }
  return 0;
}
