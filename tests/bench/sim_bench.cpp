// sim_bench: how fast the simulated cluster runs a script, next to the
// embedded cluster running the same script in the same run:
//   messages_delivered   many calls to many actors on 8 simulated nodes:
//                        messages (a call and its answer each) delivered
//                        per second of wall time
//   sequential_calls     calls one after another to an actor on another
//                        node over 1 ms links: the run's virtual time over
//                        its wall time (how much faster than real it is)
// A seed sweep is only as useful as it is cheap.
//
//   ./.build/tests/bench/sim_bench [--json] [--reps=N] [--smoke]

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/sim.hpp>
#include <lumen/util/huge_pages.hpp>

#include "bench_report.hpp"

namespace {

using lumen::bench::figure;
using lumen::bench::verify;
using clock_type = std::chrono::steady_clock;

class Sink {
public:
  int add(int x) {
    return total_ += x, x;
  }

private:
  long total_ = 0;
};
LUMEN_ACTOR(Sink, &Sink::add);

lumen::init_options simulated(int nodes, std::chrono::nanoseconds latency) {
  lumen::init_options opts;
  opts.sim.enabled = true;
  opts.sim.seed = 1;
  opts.sim.nodes = nodes;
  opts.sim.latency = latency;
  return opts;
}

/// `calls` calls spread over `actors` actors (spread over `nodes` nodes,
/// or in this process for none), all sent before any answer is awaited;
/// returns the seconds it took.
double many_calls(long calls, int actors, int nodes) {
  std::vector<lumen::ActorHandle<Sink>> sinks;
  for (int a = 0; a < actors; ++a)
    sinks.push_back(nodes == 0 ? lumen::actor<Sink>().remote()
                               : lumen::actor<Sink>()
                                   .on_node("node-" + std::to_string(a % nodes))
                                   .remote());
  auto t0 = clock_type::now();
  std::vector<lumen::ObjectRef<int>> refs;
  refs.reserve(static_cast<size_t>(calls));
  for (long i = 0; i < calls; ++i)
    refs.push_back(sinks[static_cast<size_t>(i % actors)].call(
      &Sink::add, static_cast<int>(i % 1000)));
  long sum = 0;
  for (int v : lumen::get(refs))
    sum += v;
  std::chrono::duration<double> took = clock_type::now() - t0;
  long expected = 0;
  for (long i = 0; i < calls; ++i)
    expected += i % 1000;
  verify(sum == expected, "the calls' answers add up");
  return took.count();
}

/// `calls` calls one after another to one actor; returns the seconds.
double sequential_calls(long calls, const std::string& node) {
  auto sink = node.empty() ? lumen::actor<Sink>().remote()
                           : lumen::actor<Sink>().on_node(node).remote();
  auto t0 = clock_type::now();
  for (long i = 0; i < calls; ++i)
    verify(lumen::get(sink.call(&Sink::add, 1)) == 1, "an answer");
  std::chrono::duration<double> took = clock_type::now() - t0;
  return took.count();
}

} // namespace

int main(int argc, char** argv) {
  lumen::util::use_huge_pages();
  auto opts = lumen::bench::options_or_exit(
    argc, argv, "sim_bench",
    "the simulated cluster's speed, next to the embedded cluster's for the "
    "same script");
  long calls = opts.smoke ? 2000 : 200000;
  long sequential = opts.smoke ? 200 : 10000;
  int actors = 64;

  std::vector<double> sim_rate, embedded_rate, speedup, sim_seq_wall,
    embedded_seq_wall;
  for (int rep = 0; rep < opts.reps; ++rep) {
    // A call and its answer: two messages (the answers' sum checks that
    // every one came).
    lumen::init(simulated(8, std::chrono::microseconds(50)));
    auto took = many_calls(calls, actors, 8);
    lumen::shutdown();
    sim_rate.push_back(static_cast<double>(2 * calls) / took);

    lumen::init();
    embedded_rate.push_back(static_cast<double>(2 * calls) /
                            many_calls(calls, actors, 0));
    lumen::shutdown();

    // Sequential calls over 1 ms links: virtual time against wall time.
    lumen::init(simulated(2, std::chrono::milliseconds(1)));
    auto wall = sequential_calls(sequential, "node-1");
    auto virtual_s = static_cast<double>(lumen::sim::now().count()) / 1e9;
    lumen::shutdown();
    verify(virtual_s >= 2e-3 * static_cast<double>(sequential),
           "each call took two 1 ms messages of virtual time");
    speedup.push_back(virtual_s / wall);
    sim_seq_wall.push_back(wall);

    lumen::init();
    embedded_seq_wall.push_back(sequential_calls(sequential, ""));
    lumen::shutdown();
  }

  std::vector<figure> figs;
  figure embedded{"embedded_messages_delivered", "msgs/s", embedded_rate,
                  calls};
  embedded.label = "embedded cluster, same calls";
  figure sim{"sim_messages_delivered", "msgs/s", sim_rate, calls};
  sim.label = "simulated, 64 actors on 8 nodes";
  lumen::bench::compare(sim, embedded);
  figs.push_back(embedded);
  figs.push_back(sim);
  figure faster{"sim_sequential_calls_virtual_over_wall", "x", speedup,
                sequential};
  faster.label = "simulated 1 ms calls: virtual/wall";
  figs.push_back(faster);
  figure emb_seq{"embedded_sequential_calls_wall", "s", embedded_seq_wall,
                 sequential};
  emb_seq.label = "embedded, same sequential calls";
  figure sim_seq{"sim_sequential_calls_wall", "s", sim_seq_wall, sequential};
  sim_seq.label = "simulated, same sequential calls";
  figs.push_back(emb_seq);
  figs.push_back(sim_seq);
  lumen::bench::print("sim_bench", figs, opts.json);
  return 0;
}
