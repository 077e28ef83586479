#pragma once

// allreduce_bench across processes: a head (`lumen start --head`) and N
// members, each this benchmark run again with --member, joined as drivers
// and talking over channels on loopback TCP, as members on different
// hosts would. Rank 0 reports each figure on a line its parent reads:
//   FIG name n bytes algorithm t_min_us busbw...
// Beside them, the loopback TCP bulk bandwidth measured in the same run
// and the time it allows a ring (the floor).

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

#include "bench_report.hpp"
#include "process.hpp"
#include "tcp_baseline.hpp"

namespace lumen::bench {

namespace coll = lumen::collective;

/// Operations per repetition: enough for a stable time, few when large.
inline int iterations_for(size_t bytes, bool smoke) {
  if (smoke)
    return 2;
  return static_cast<int>(
    std::clamp<size_t>((size_t{256} << 20) / bytes, 3, 2000));
}

inline std::string size_label(size_t bytes) {
  if (bytes % (1 << 20) == 0)
    return std::to_string(bytes >> 20) + "MiB";
  if (bytes % 1024 == 0)
    return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

/// A figure of busbw samples, labelled by name, N and size.
inline figure allreduce_figure(const std::string& name, int n, size_t bytes,
                               std::vector<double> busbw, double t_min_us,
                               const std::string& algorithm) {
  figure f{name, "GB/s", std::move(busbw), n, static_cast<long>(bytes)};
  f.label = name + "_n" + std::to_string(n) + "_" + size_label(bytes);
  f.extra = {{"t_min_us", std::to_string(t_min_us)},
             {"algorithm", "\"" + json_escape(algorithm) + "\""}};
  return f;
}

/// --member HEAD TOKEN_FILE N RANK NAME ALGORITHM REPS SMOKE SIZES...: one
/// member (ALGORITHM naive, ring, auto: Lumen's choice, or started:
/// allreduce_start); rank 0 prints the figures.
inline int run_member(int argc, char** argv) {
  if (argc < 11)
    return 2;
  lumen::init_options opts;
  opts.address = argv[2];
  opts.token_file = argv[3];
  int n = std::atoi(argv[4]);
  int rank = std::atoi(argv[5]);
  std::string name = argv[6];
  std::string algorithm = argv[7];
  int reps = std::atoi(argv[8]);
  bool smoke = std::string{argv[9]} == "1";
  lumen::init(opts);
  std::string group = name + "-" + std::to_string(n);
  coll::init_group(n, rank, group, coll::backend::processes);
  if (algorithm == "naive")
    coll::set_algorithm(group, coll::allreduce_algorithm::naive);
  if (algorithm == "ring")
    coll::set_algorithm(group, coll::allreduce_algorithm::ring);
  bool started = algorithm == "started";
  for (int a = 10; a < argc; ++a) {
    size_t bytes = std::strtoull(argv[a], nullptr, 10);
    lumen::ml::tensor t({static_cast<int64_t>(bytes / sizeof(float))});
    std::fill(t.data<float>(), t.data<float>() + t.numel(), rank + 1.0f);
    // As the trainer does it: from an allreduce_buffer (on one host, in
    // the members' shared memory), written again once everyone read it,
    // as backward writes the next gradient there. The writing is not
    // timed; what it leaves in the caches is (an input never written
    // again stays in every member's cache, and its all-reduce moves no
    // bytes between the cores).
    coll::allreduce_buffer in;
    if (started)
      in = coll::allreduce_buffer{t.numel(), group};
    std::chrono::steady_clock::duration writing{};
    auto once = [&] {
      if (!started)
        return coll::allreduce(t, group, coll::reduce_op::average);
      in.reuse();
      auto from = std::chrono::steady_clock::now();
      std::fill(in.data(), in.data() + in.size(), rank + 1.0f);
      writing += std::chrono::steady_clock::now() - from;
      coll::allreduce_start(in.data(), t.data<float>(), t.numel(), group,
                            coll::reduce_op::average)
        .wait();
    };
    int iters = iterations_for(bytes, smoke);
    once(); // warm
    std::vector<double> busbw;
    double t_min = 1e30;
    for (int rep = 0; rep < reps; ++rep) {
      coll::barrier(group);
      writing = {};
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i)
        once();
      // The slowest member's time is the operation's.
      lumen::ml::tensor took{{1}, lumen::ml::dtype::float64};
      took.data<double>()[0] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0 -
                                      writing)
          .count() /
        iters;
      coll::allreduce(took, group, coll::reduce_op::max);
      t_min = std::min(t_min, took.data<double>()[0] * 1e6);
      busbw.push_back(static_cast<double>(bytes) / took.data<double>()[0] *
                      2.0 * (n - 1) / n / 1e9);
    }
    float want = (n + 1) / 2.0f;
    for (size_t i = 0; i < t.numel(); i += 997)
      verify(t.data<float>()[i] == want, group + " average");
    if (rank == 0) {
      std::cout << "FIG " << name << " " << n << " " << bytes << " "
                << (started && in.shared()
                      ? std::string{"shared_memory"}
                      : coll::to_string(coll::algorithm_for(group, bytes)))
                << " " << t_min;
      for (double b : busbw)
        std::cout << " " << b;
      std::cout << std::endl;
    }
  }
  coll::destroy_group(group);
  lumen::shutdown();
  return 0;
}

/// Loopback TCP bulk bandwidth (bytes/s), best of `reps`: 64 MiB echoed
/// through one connection, each way in turn.
inline double tcp_bandwidth(tcp_echo& echo, int reps, bool smoke) {
  std::vector<char> out(smoke ? (1 << 20) : (64 << 20), 'x'), in;
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    echo.round_trip(out, in);
    double t =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
        .count();
    best = std::max(best, 2.0 * static_cast<double>(out.size()) / t);
  }
  return best;
}

/// Seconds a single thread takes to add `bytes` of floats into as many.
inline double reduce_seconds(size_t bytes) {
  std::vector<float> a(bytes / sizeof(float), 1.0f), b(a.size(), 2.0f);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    coll::reduce_into(a.data(), b.data(), a.size(), coll::reduce_op::sum);
    best = std::min(
      best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count());
  }
  verify(a[0] > 2.0f, "reduction");
  return best;
}

/// The cross-process figures: ring_tcp (Lumen's choice of algorithm per
/// size), naive_tcp, started_shm (allreduce_start from an
/// allreduce_buffer, as the trainer's workers meet in shared memory), and
/// the TCP floor, for each N and size.
inline std::vector<figure> process_figures(const options& opts,
                                           const std::string& self,
                                           const std::string& lumen_cli,
                                           double tcp_bytes_per_s,
                                           const std::vector<int>& worlds,
                                           const std::vector<size_t>& sizes) {
  char tmpl[] = "/tmp/lumen-allreduce-bench-XXXXXX";
  std::string home = ::mkdtemp(tmpl);
  std::string token = home + "/token";
  std::vector<std::string> env{"HOME=" + home};
  lumen::test::process head{{lumen_cli, "start", "--block", "--head", "--port",
                             "0", "--token-file", token, "--num-cpus", "1"},
                            env};
  auto out = head.await_output("(pid", std::chrono::seconds(30));
  verify(out.has_value(), "the head starts: " + head.output());
  auto started = lumen::test::parse_started(*out);
  verify(started.has_value(), "the head says where it listens");
  std::vector<figure> figs;
  for (int n : worlds)
    for (std::string name : {"ring_tcp", "naive_tcp", "started_shm"}) {
      std::vector<std::unique_ptr<lumen::test::process>> members;
      for (int r = 0; r < n; ++r) {
        std::vector<std::string> argv{self,
                                      "--member",
                                      started->address,
                                      token,
                                      std::to_string(n),
                                      std::to_string(r),
                                      name,
                                      name == "naive_tcp"     ? "naive"
                                      : name == "started_shm" ? "started"
                                                              : "auto",
                                      std::to_string(opts.reps),
                                      opts.smoke ? "1" : "0"};
        for (auto b : sizes)
          argv.push_back(std::to_string(b));
        members.push_back(std::make_unique<lumen::test::process>(argv, env));
      }
      for (auto& m : members)
        if (int rc = m->wait(); rc != 0)
          verify(false, "a member failed (exit " + std::to_string(rc) +
                          "): " + m->output());
      std::istringstream lines{members[0]->output()};
      for (std::string line; std::getline(lines, line);) {
        std::istringstream in{line};
        std::string tag, fig_name, algorithm;
        int fig_n = 0;
        size_t bytes = 0;
        double t_min = 0;
        if (!(in >> tag >> fig_name >> fig_n >> bytes >> algorithm >> t_min) ||
            tag != "FIG")
          continue;
        std::vector<double> busbw;
        for (double b; in >> b;)
          busbw.push_back(b);
        figs.push_back(
          allreduce_figure(fig_name, fig_n, bytes, busbw, t_min, algorithm));
      }
    }
  head.kill(SIGTERM);
  // The floors: a ring moves 2(N-1)/N·S through each member's link and
  // reduces (N-1)/N·S; nothing over TCP can beat the two added up
  // (tcp_floor, as for members on hosts of their own). On one host the N
  // links share one loopback, which then carries 2(N-1)·S in all
  // (tcp_floor_host).
  for (int n : worlds)
    for (auto b : sizes) {
      double moved = 2.0 * (n - 1) / n * static_cast<double>(b);
      double reduce = reduce_seconds(b) * (n - 1) / n;
      double t = moved / tcp_bytes_per_s + reduce;
      auto floor =
        allreduce_figure("tcp_floor", n, b, {moved / t / 1e9}, t * 1e6,
                         "2(N-1)/N·S through one TCP link + the reduction");
      double t_host = moved * n / tcp_bytes_per_s + reduce;
      auto host = allreduce_figure("tcp_floor_host", n, b,
                                   {moved / t_host / 1e9}, t_host * 1e6,
                                   "2(N-1)·S through one loopback + the "
                                   "reduction");
      for (auto& f : figs)
        if (f.name == "ring_tcp" && f.n == n && f.bytes == static_cast<long>(b))
          compare(f, floor);
      figs.push_back(floor);
      figs.push_back(host);
    }
  // The naive baseline's ratio is to the ring: how much the ring wins.
  for (auto& f : figs)
    if (f.name == "naive_tcp")
      for (auto& ring : figs)
        if (ring.name == "ring_tcp" && ring.n == f.n && ring.bytes == f.bytes)
          compare(f, ring);
  return figs;
}

} // namespace lumen::bench
