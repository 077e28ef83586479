// allreduce_bench: all-reduce (average) of N members' buffers, next to a
// naive baseline in the same run (gather to rank 0, reduce, broadcast):
//   ring_inproc / naive_inproc  members are threads of one process, as
//                               Lumen actors in one process are
//   ring_tcp / naive_tcp        members are processes of their own, on
//                               channels over loopback TCP
//                               (allreduce_procs.hpp), next to the TCP floor of
//                               the same run
//   recorder_on/off_inproc      the in-process all-reduce with the flight
//                               recorder on and off (its cost)
// Prints time per operation and bus bandwidth, busbw = S / t · 2(N-1)/N
// (what each member moves, as NCCL and the issue define it), verified
// against the closed form, and the algorithm each size took.
//
//   ./.build/tests/bench/allreduce_bench [--json] [--reps=N] [--smoke]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <lumen/ml.hpp>
#include <lumen/util/huge_pages.hpp>

#include "allreduce_procs.hpp"
#include "bench_report.hpp"

namespace coll = lumen::collective;
using lumen::bench::figure;
using lumen::bench::verify;
using lumen::ml::tensor;

namespace {

struct run_result {
  std::vector<double> busbw;   // GB/s, one per repetition
  std::vector<double> t_op_us; // time per operation, one per repetition
};

/// One all-reduce (average) by member `rank` of `group`, whose members'
/// buffers are `all`.
using allreduce_fn = std::function<void(int rank, std::vector<tensor>& all,
                                        const std::string& group)>;

/// Runs `op` `iters` times on `n` member threads, `reps` times; each
/// repetition is timed from a common start to the last member done. Every
/// member's buffer starts as all rank+1; averaging keeps it at (n+1)/2,
/// which is checked at the end.
run_result measure(int n, size_t bytes, int iters, int reps,
                   const std::string& group, const allreduce_fn& op) {
  run_result out;
  size_t length = bytes / sizeof(float);
  std::vector<tensor> bufs;
  for (int r = 0; r < n; ++r) {
    tensor t({static_cast<int64_t>(length)});
    std::fill(t.data<float>(), t.data<float>() + length, r + 1.0f);
    bufs.push_back(t);
  }
  for (int rep = 0; rep < reps; ++rep) {
    std::vector<std::thread> members;
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<double> took(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r)
      members.emplace_back([&, r] {
        coll::init_group(n, r, group);
        op(r, bufs, group); // warm: pages, threads
        ++ready;
        while (!go)
          std::this_thread::yield();
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i)
          op(r, bufs, group);
        took[static_cast<size_t>(r)] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
        coll::destroy_group(group);
      });
    while (ready < n)
      std::this_thread::yield();
    go = true;
    for (auto& m : members)
      m.join();
    double t = *std::max_element(took.begin(), took.end()) / iters;
    out.t_op_us.push_back(t * 1e6);
    out.busbw.push_back(static_cast<double>(bytes) / t * 2.0 * (n - 1) / n /
                        1e9);
  }
  float want = (n + 1) / 2.0f;
  for (auto& b : bufs)
    for (size_t i = 0; i < length; i += 997)
      verify(b.data<float>()[i] == want, group + " average");
  return out;
}

figure make_figure(const std::string& name, int n, size_t bytes,
                   const run_result& r, const std::string& algorithm) {
  return lumen::bench::allreduce_figure(
    name, n, bytes, r.busbw,
    *std::min_element(r.t_op_us.begin(), r.t_op_us.end()), algorithm);
}

/// The algorithm an all-reduce of `bytes` picks, asked of a group of one.
std::string algorithm_of(size_t bytes) {
  coll::init_group(1, 0, "probe");
  auto a = coll::algorithm_for("probe", bytes);
  coll::destroy_group("probe");
  return coll::to_string(a);
}

} // namespace

int run(int argc, char** argv) {
  if (argc > 1 && std::string{argv[1]} == "--member")
    return lumen::bench::run_member(argc, argv);
  lumen::bench::tcp_echo echo; // forks: before any thread starts
  auto opts = lumen::bench::options_or_exit(
    argc, argv, "allreduce_bench",
    "all-reduce of N members in one process and in processes of their "
    "own, next to a naive gather-reduce-broadcast and the TCP floor");
  std::vector<size_t> sizes =
    opts.smoke
      ? std::vector<size_t>{4096, 256 << 10}
      : std::vector<size_t>{4096, 256 << 10, 940584, 4 << 20, 64 << 20};
  std::vector<int> worlds =
    opts.smoke ? std::vector<int>{2, 4} : std::vector<int>{2, 3, 4};
  // Lumen's: each member reduces its slice over all members' memory (or,
  // small, everyone's copies).
  allreduce_fn fused = [](int r, std::vector<tensor>& all,
                          const std::string& group) {
    coll::allreduce(all[static_cast<size_t>(r)], group,
                    coll::reduce_op::average);
  };
  // The baseline: rank 0 reduces everything alone, the others then copy.
  allreduce_fn naive = [](int r, std::vector<tensor>& all,
                          const std::string& group) {
    coll::barrier(group);
    if (r == 0) {
      auto acc = all[0].data<float>();
      for (size_t q = 1; q < all.size(); ++q)
        coll::reduce_into(acc, all[q].data<float>(), all[0].numel(),
                          coll::reduce_op::sum);
      coll::finish(acc, all[0].numel(), coll::reduce_op::average, all.size());
    }
    coll::barrier(group);
    if (r != 0)
      std::copy(all[0].data<float>(), all[0].data<float>() + all[0].numel(),
                all[static_cast<size_t>(r)].data<float>());
    coll::barrier(group);
  };
  std::vector<figure> figs;
  int group_id = 0;
  for (int n : worlds)
    for (size_t bytes : sizes) {
      // Enough operations for a stable time, few for the large sizes.
      int iters = lumen::bench::iterations_for(bytes, opts.smoke);
      auto group = "bench" + std::to_string(group_id++);
      auto base = make_figure("naive_inproc", n, bytes,
                              measure(n, bytes, iters, opts.reps, group, naive),
                              "gather to rank 0, reduce, broadcast");
      auto algorithm = algorithm_of(bytes);
      auto ours = make_figure(
        "ring_inproc", n, bytes,
        measure(n, bytes, iters, opts.reps, group, fused),
        (algorithm == "direct"
           ? "direct: each rank reduces all members' copies into its own"
           : "slices: each rank reduces its slice over all members' and "
             "writes it into all of them"));
      lumen::bench::compare(ours, base);
      figs.push_back(ours);
      figs.push_back(base);
    }
  // The flight recorder's cost: the same all-reduce with it on (the
  // default) and off, repetitions alternating so that a drift of the
  // machine falls on both, four times as many as the other figures take
  // (the cost sought is a few percent). Two members: more than the cores
  // of a small machine would time its scheduler instead.
  for (int n : {2})
    for (size_t bytes : {size_t{4096}, size_t{256} << 10}) {
      int iters = lumen::bench::iterations_for(bytes, opts.smoke);
      auto group = "bench" + std::to_string(group_id++);
      run_result on, off;
      for (int rep = 0; rep < 4 * opts.reps; ++rep)
        for (bool recording : {false, true}) {
          coll::set_flight_recorder(recording ? 64 : 0);
          auto r = measure(n, bytes, iters, 1, group, fused);
          auto& into = recording ? on : off;
          into.busbw.push_back(r.busbw[0]);
          into.t_op_us.push_back(r.t_op_us[0]);
        }
      coll::set_flight_recorder(64);
      auto with = make_figure("recorder_on_inproc", n, bytes, on,
                              "flight recorder on: the last 64 operations");
      auto without = make_figure("recorder_off_inproc", n, bytes, off,
                                 "flight recorder off");
      lumen::bench::compare(with, without);
      figs.push_back(with);
      figs.push_back(without);
    }
  auto tcp = lumen::bench::tcp_bandwidth(echo, opts.reps, opts.smoke);
  auto across =
    lumen::bench::process_figures(opts, argv[0], LUMEN_CLI, tcp, worlds, sizes);
  figs.insert(figs.end(), across.begin(), across.end());
  figure bulk{
    "tcp_bulk", "GB/s", {tcp / 1e9}, 1, opts.smoke ? (1 << 20) : (64 << 20)};
  figs.push_back(bulk);
  lumen::bench::print("allreduce_bench", figs, opts.json);
  return 0;
}

int main(int argc, char** argv) {
  lumen::util::use_huge_pages();
  // Caught, so that the stack unwinds: the head, the members and the echo
  // server this run started end with it, also when a figure is wrong.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 1;
  }
}
