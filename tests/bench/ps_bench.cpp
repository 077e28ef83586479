// ps_bench: the parameter server's figures on Fashion-MNIST, with its
// server and workers as actors of this process, each worker computing on
// a thread of its own:
//   stragglers  one of 4 workers 3x slower: time for async and for backup
//               (b = 1) to reach the loss sync ends with, over sync's time
//   no straggler  async's final loss against sync's
//   tail        each step a 5% chance of a 10x delay per worker, 5
//               workers, 2,000 steps: p99 step time of sync over backup's
//               (b = 1, 2; b = 1 with a deadline of 3 median steps),
//               accuracy
//   codecs      bytes on the wire and accuracy of fp16, int8 with and
//               without error feedback, against fp32
//   prefetch    a worker's time waiting for data, with and without
//   accuracy    softmax regression and the MLP trained through the server
//   simulated   the straggler and tail runs on a simulated cluster, a
//               node each, as on machines that share no cores: the rules'
//               figures, the same for a seed on any machine
//   processes   the server on another node: the MLP's gradient pushed and
//               the weights back, small requests, beside raw TCP of the
//               same bytes; a 10M-parameter model's pushes to 1, 2 and 4
//               shards, each in a process of its own
// Each repetition (--reps, 5 by default) trains with seeds of its own
// (weights, batch orders, slowdowns): a figure's min, median and max are
// over those draws. Losses and accuracies are means over the snapshots of
// a tenth of a run's gradients, not one snapshot's draw.
// Run:  ./.build/tests/bench/ps_bench [--json] [--reps=N] [--plot=FILE]
//                                    [--only=GROUP]
// (--plot: the stragglers' loss against time as SVG; ps_bench_loss.svg
// by default.) Needs dataset-fashion-mnist.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/cli.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>
#include <lumen/sim.hpp>
#include <lumen/util/huge_pages.hpp>

#include "bench_nodes.hpp"
#include "bench_report.hpp"
#include "tcp_baseline.hpp"

namespace ml = lumen::ml;
using lumen::bench::figure;
using lumen::bench::verify;

namespace {

struct data {
  ml::dataset train, test, eval; // eval: the test set's first rows, for curves
};

data load(bool smoke) {
  data d;
  d.train = ml::load_fashion_mnist(ml::split::train);
  d.test = ml::load_fashion_mnist(ml::split::test);
  ml::standardize(d.train, 0.2860f, 0.3530f);
  ml::standardize(d.test, 0.2860f, 0.3530f);
  auto first = [](const ml::dataset& s, size_t n) {
    std::vector<size_t> rows(std::min(n, s.size()));
    for (size_t i = 0; i < rows.size(); ++i)
      rows[i] = i;
    return s.take(rows);
  };
  if (smoke) {
    d.train = first(d.train, 4000);
    d.test = first(d.test, 1000);
  }
  d.eval = first(d.test, smoke ? 500 : 2000);
  return d;
}

/// A server and its workers, and the version to train to. Every seed of
/// a run (weights, batch orders, slowdowns) is drawn from `seed`: a
/// repetition is another draw.
struct setup {
  ml::ps_config server;
  std::vector<ml::worker_config> workers;
  uint64_t until = 0;
  uint64_t seed = 1;
};

/// What a run left: the server's weights and version every few
/// milliseconds, the reports, the time it took.
struct outcome {
  std::vector<double> at; // seconds since the start
  std::vector<uint64_t> versions;
  std::vector<ml::tensor> weights;
  double seconds = 0;
  ml::ps_report server;
  std::vector<ml::worker_report> workers;
  size_t per_version = 1; // gradients a version takes
};

size_t per_version(const setup& s) {
  return s.server.mode == ml::ps_mode::async
           ? 1
           : s.server.workers - s.server.backup;
}

/// Where a run's server (0) and worker w (w + 1) go: this node, or on a
/// simulated cluster a node each, as on machines of their own.
std::string node_of(size_t k) {
  return lumen::sim::active() ? "node-" + std::to_string(k)
                              : lumen::this_node_id();
}

outcome run(const data& d, const setup& s) {
  auto net = ml::make_model(s.workers.front().model);
  auto ps = ml::spawn_parameter_server(
    s.server, net->init(ml::derive_seed(s.seed, 0)), node_of(0));
  std::vector<ml::data_parallel_worker> workers;
  for (size_t w = 0; w < s.workers.size(); ++w)
    workers.push_back(ml::spawn_worker(
      s.workers[w], ml::shard_of(d.train, w, s.workers.size(), 3),
      node_of(w + 1)));
  // A simulated step takes ten times a real one (compute charged at 10
  // GFLOP/s): snapshots as many steps apart.
  auto every = std::chrono::milliseconds(lumen::sim::active() ? 50 : 5);
  outcome o;
  o.per_version = per_version(s);
  auto start = lumen::now();
  std::vector<lumen::ObjectRef<ml::worker_report>> runs;
  for (auto& w : workers)
    runs.push_back(lumen::call(w, ml::train_atom::value, ps, s.until));
  for (;;) {
    auto done = lumen::wait(runs, runs.size(), every);
    auto [version, w] = lumen::get(lumen::call(ps, ml::pull_atom::value));
    o.at.push_back(std::chrono::duration<double>(lumen::now() - start).count());
    o.versions.push_back(version);
    o.weights.push_back(w);
    if (done.pending.empty())
      break;
  }
  o.seconds = o.at.back();
  o.workers = lumen::get(runs);
  o.server = lumen::get(lumen::call(ps, ml::ps_stats_atom::value));
  verify(o.server.version >= s.until, "the server reached its last version");
  // Their shards and threads go now, not at shutdown.
  for (auto& w : workers)
    caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(ps, caf::exit_reason::user_shutdown);
  return o;
}

float loss_at(const ml::model& net, const ml::tensor& w, const ml::dataset& d) {
  return net.loss(w.data<float>(), d);
}

double gradients_at(const outcome& o, size_t snapshot) {
  return static_cast<double>(o.versions[snapshot] * o.per_version);
}

/// The first snapshot of the window of `window` gradients that ends at
/// snapshot `last`: a step's weights are one draw of SGD's noise, the
/// mean over a window is the curve.
size_t window_first(const outcome& o, size_t last, double window) {
  auto first = last;
  while (first > 0 &&
         gradients_at(o, last) - gradients_at(o, first - 1) < window)
    --first;
  return first;
}

/// The mean of `at` over snapshots [first, last].
double mean_of(const std::vector<double>& at, size_t first, size_t last) {
  double sum = 0;
  for (auto i = first; i <= last; ++i)
    sum += at[i];
  return sum / static_cast<double>(last - first + 1);
}

/// A run's loss on `d` at each snapshot, as the mean over its window.
std::vector<double> loss_curve(const ml::model& net, const outcome& o,
                               const ml::dataset& d, double window) {
  std::vector<double> at(o.weights.size()), out(o.weights.size());
  for (size_t i = 0; i < o.weights.size(); ++i) {
    at[i] = loss_at(net, o.weights[i], d);
    out[i] = mean_of(at, window_first(o, i, window), i);
  }
  return out;
}

/// `f` of the weights, as the mean over the snapshots of a run's last
/// `window` gradients (only those evaluated).
template <class F>
double final_mean(const outcome& o, double window, F f) {
  auto last = o.weights.size() - 1, first = window_first(o, last, window);
  std::vector<double> at(o.weights.size());
  for (auto i = first; i <= last; ++i)
    at[i] = f(o.weights[i]);
  return mean_of(at, first, last);
}

double final_loss(const ml::model& net, const outcome& o, const ml::dataset& d,
                  double window) {
  return final_mean(o, window,
                    [&](const ml::tensor& w) { return loss_at(net, w, d); });
}

/// The test accuracy (percent) at the end of a run.
double final_accuracy(const ml::model& net, const outcome& o,
                      const ml::dataset& d, double window) {
  return 100.0 * final_mean(o, window, [&](const ml::tensor& w) {
           return net.accuracy(w.data<float>(), d);
         });
}

/// When a run's smoothed loss first came to `target`, if it did.
std::optional<double> time_to(const std::vector<double>& curve,
                              const outcome& o, double target) {
  for (size_t i = 0; i < curve.size(); ++i)
    if (curve[i] <= target)
      return o.at[i];
  return std::nullopt;
}

/// The loss curve, every snapshot.
ml::series curve(const std::vector<double>& loss, const outcome& o,
                 const std::string& name) {
  return ml::series{name, o.at, loss};
}

double quantile(std::vector<float> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

double mean(const std::vector<float>& v) {
  double sum = 0;
  for (auto x : v)
    sum += x;
  return sum / static_cast<double>(v.size());
}

uint64_t bytes_sent(const outcome& o) {
  uint64_t n = 0;
  for (auto& r : o.workers)
    n += r.bytes_sent;
  return n;
}

/// Collects one sample per repetition for each named figure.
struct table {
  std::vector<figure> figs;
  std::string suffix; // of every name added: "_sim" on the simulated cluster

  figure& at(const std::string& name, const std::string& unit, long n = 0) {
    for (auto& f : figs)
      if (f.name == name)
        return f;
    figs.emplace_back(name, unit, std::vector<double>{}, n);
    return figs.back();
  }
  void add(const std::string& name, const std::string& unit, double v,
           long n = 0) {
    at(name + suffix, unit, n).samples.push_back(v);
  }
};

/// The MLP 784-256-128-10's gradient: 235,146 floats.
constexpr size_t mlp_gradient_bytes = 940584;

ml::worker_config worker(const ml::model_spec& model, uint64_t run_seed,
                         uint64_t seed) {
  ml::worker_config w;
  w.model = model;
  w.batch_size = 64;
  w.seed = ml::derive_seed(run_seed, seed);
  return w;
}

setup sync_setup(const ml::model_spec& model, size_t n, uint64_t until,
                 float lr, uint64_t seed) {
  setup s;
  s.seed = seed;
  s.server.workers = n;
  s.server.optimizer.lr = lr;
  for (size_t w = 0; w < n; ++w)
    s.workers.push_back(worker(model, seed, 10 + w));
  s.until = until;
  return s;
}

/// The same workers against an async server taking as many gradients.
setup async_of(setup s) {
  s.server.mode = ml::ps_mode::async;
  s.until *= s.workers.size() - s.server.backup;
  s.server.backup = 0;
  return s;
}

/// The gradients a run's figures are averaged over: a tenth of what `s`
/// takes.
double window_of(const setup& s) {
  return static_cast<double>(s.until * per_version(s)) / 10.0;
}

struct scale {
  ml::model_spec mlp, softmax, big_mlp;
  uint64_t steps, tail_steps, accuracy_steps, big_steps;
  uint64_t seed = 1; // the repetition's
};

void stragglers(const data& d, const scale& z, table& t,
                std::vector<ml::series>* plot) {
  auto net = ml::make_model(z.mlp);
  auto sync = sync_setup(z.mlp, 4, z.steps, 0.1f, z.seed);
  sync.workers[3].slow.factor = 3;
  auto backup = sync;
  backup.server.backup = 1;
  backup.until = 2 * z.steps; // room to get there: fewer gradients a step
  auto async = async_of(sync);
  auto s = run(d, sync), a = run(d, async), b = run(d, backup);
  auto window = window_of(sync);
  auto ls = loss_curve(*net, s, d.eval, window);
  auto la = loss_curve(*net, a, d.eval, window);
  auto lb = loss_curve(*net, b, d.eval, window);
  for (auto [name, o, l] :
       {std::tuple{"straggler_async_time_ratio", &a, &la},
        std::tuple{"straggler_backup_time_ratio", &b, &lb}}) {
    auto when = time_to(*l, *o, ls.back());
    // Not there by the end: the whole run, which is then an upper bound.
    t.add(name, "ratio", (when ? *when : o->seconds) / s.seconds);
  }
  t.add("straggler_sync_seconds", "s", s.seconds, static_cast<long>(z.steps));
  if (plot) {
    plot->push_back(curve(ls, s, "sync"));
    plot->push_back(curve(la, a, "async (lr / staleness)"));
    plot->push_back(curve(lb, b, "backup b = 1"));
  }
}

void no_straggler(const data& d, const scale& z, table& t) {
  auto net = ml::make_model(z.mlp);
  auto sync = sync_setup(z.mlp, 4, z.steps, 0.1f, z.seed);
  auto s = run(d, sync), a = run(d, async_of(sync));
  auto ls = final_loss(*net, s, d.test, window_of(sync));
  auto la = final_loss(*net, a, d.test, window_of(sync));
  t.add("no_straggler_async_loss_gap", "ratio", (la - ls) / ls);
}

void tail(const data& d, const scale& z, table& t) {
  auto net = ml::make_model(z.mlp);
  auto sync = sync_setup(z.mlp, 5, z.tail_steps, 0.1f, z.seed);
  for (auto& w : sync.workers) {
    w.slow.chance = 0.05;
    w.slow.chance_factor = 10;
  }
  // As many gradients as sync takes: a backup step has fewer.
  auto b1 = sync, b2 = sync;
  b1.server.backup = 1;
  b1.until = z.tail_steps * 5 / 4;
  b2.server.backup = 2;
  b2.until = z.tail_steps * 5 / 3;
  // Backup b = 1 and a deadline of three median steps.
  auto dl = b1;
  dl.server.step_deadline = 3;
  auto s = run(d, sync), o1 = run(d, b1), o2 = run(d, b2), od = run(d, dl);
  auto p99 = [](const outcome& o) {
    return quantile(o.server.step_seconds, 0.99);
  };
  t.add("p99_step_speedup_backup", "ratio", p99(s) / p99(o1));
  t.add("p99_step_speedup_backup2", "ratio", p99(s) / p99(o2));
  t.add("p99_step_speedup_deadline", "ratio", p99(s) / p99(od));
  t.add("mean_step_speedup_backup", "ratio",
        mean(s.server.step_seconds) / mean(o1.server.step_seconds));
  t.add("gradients_per_step_deadline", "ratio",
        static_cast<double>(od.server.applied) /
          static_cast<double>(od.server.version));
  auto acc = [&](const outcome& o) {
    return final_accuracy(*net, o, d.test, window_of(sync));
  };
  t.add("accuracy_delta_backup_pts", "points", acc(o1) - acc(s));
  t.add("accuracy_delta_deadline_pts", "points", acc(od) - acc(s));
}

void codecs(const data& d, const scale& z, table& t) {
  auto net = ml::make_model(z.mlp);
  auto base = sync_setup(z.mlp, 4, z.steps, 0.1f, z.seed);
  auto with = [&](ml::codec c, bool feedback) {
    auto s = base;
    for (auto& w : s.workers) {
      w.compression = c;
      w.error_feedback = feedback;
    }
    return run(d, s);
  };
  auto acc = [&](const outcome& o) {
    return final_accuracy(*net, o, d.test, window_of(base));
  };
  auto fp32 = with(ml::codec::none, false);
  auto fp16 = with(ml::codec::fp16, true);
  auto int8 = with(ml::codec::int8, true);
  auto int8_plain = with(ml::codec::int8, false);
  auto ratio = [&](const outcome& o) {
    return static_cast<double>(bytes_sent(o)) /
           static_cast<double>(bytes_sent(fp32));
  };
  t.add("bytes_ratio_fp16", "ratio", ratio(fp16));
  t.add("bytes_ratio_int8", "ratio", ratio(int8));
  t.add("accuracy_delta_fp16_pts", "points", acc(fp16) - acc(fp32));
  t.add("accuracy_delta_int8_ef_pts", "points", acc(int8) - acc(fp32));
  t.add("accuracy_delta_int8_noef_pts", "points", acc(int8_plain) - acc(fp32));
  // Both ways: int8 gradients up, int8 changes of the weights back.
  auto both = base;
  for (auto& w : both.workers)
    w.compression = ml::codec::int8;
  both.server.broadcast = ml::codec::int8;
  auto int8_both = run(d, both);
  auto wire = [](const outcome& o) {
    uint64_t n = 0;
    for (auto& r : o.workers)
      n += r.bytes_sent + r.bytes_received;
    return static_cast<double>(n);
  };
  t.add("bytes_ratio_int8_both_ways", "ratio", wire(int8_both) / wire(fp32));
  t.add("accuracy_delta_int8_both_ways_pts", "points",
        acc(int8_both) - acc(fp32));
  t.add("drift_max_broadcast_int8", "abs", int8_both.server.drift_max);
}

void prefetch(const data& d, const scale& z, table& t) {
  for (bool ahead : {true, false}) {
    auto s = sync_setup(z.mlp, 1, z.steps, 0.1f, z.seed);
    s.workers[0].prefetch = ahead;
    auto o = run(d, s);
    auto& r = o.workers[0];
    t.add(ahead ? "data_wait_fraction_prefetch"
                : "data_wait_fraction_noprefetch",
          "ratio", r.data_wait_seconds / o.seconds);
  }
}

void accuracy(const data& d, const scale& z, table& t) {
  auto soft = sync_setup(z.softmax, 4, z.accuracy_steps, 0.005f, z.seed);
  soft.server.optimizer.kind = ml::optimizer_kind::momentum;
  soft.server.optimizer.momentum = 0.9f;
  auto o = run(d, soft);
  t.add("accuracy_softmax_ps", "fraction",
        ml::make_model(z.softmax)->accuracy(o.weights.back().data<float>(),
                                            d.test));
  auto big = sync_setup(z.big_mlp, 4, z.big_steps, 0.03f, z.seed);
  big.server.optimizer.kind = ml::optimizer_kind::momentum;
  big.server.optimizer.momentum = 0.9f;
  auto b = run(d, big);
  t.add("accuracy_mlp_sync", "fraction",
        ml::make_model(z.big_mlp)->accuracy(b.weights.back().data<float>(),
                                            d.test));
}

/// Rates of each of `runs`, `n` operations each, a repetition of each in
/// turn, so that all see the same moments of a machine whose speed
/// wanders.
std::vector<std::vector<double>>
interleaved_rates(int reps, long n,
                  const std::vector<std::function<void()>>& runs) {
  std::vector<std::vector<double>> out(runs.size());
  for (int r = 0; r < reps; ++r)
    for (size_t k = 0; k < runs.size(); ++k)
      out[k].push_back(lumen::bench::rate(1, n, runs[k])[0]);
  return out;
}

/// Rates of `ours` and of `base`, in turns.
std::pair<std::vector<double>, std::vector<double>>
paired_rates(int reps, long n, const std::function<void()>& ours,
             const std::function<void()>& base) {
  auto both = interleaved_rates(reps, n, {ours, base});
  return {both[0], both[1]};
}

/// A process's proportional set size, in bytes: its share of each page it
/// maps, a page shared by k processes counting 1/k.
double pss_bytes(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/smaps_rollup"};
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Pss:", 0) == 0)
      return std::stod(line.substr(4)) * 1024.0;
  return 0;
}

/// Four workers, one in each of `nodes` (processes of one machine), read
/// their shards: the PSS the four processes grew by, over one copy of the
/// data set.
double data_pss_ratio(const std::vector<lumen::bench::node_process>& nodes,
                      bool shared, bool smoke) {
  ml::worker_config cfg;
  cfg.model = {"softmax_regression", 784, {}, 10};
  double before = 0;
  for (auto& n : nodes)
    before += pss_bytes(n.proc->pid());
  std::vector<ml::data_parallel_worker> workers;
  ml::node_shard shard;
  shard.which = smoke ? ml::split::test : ml::split::train;
  shard.workers = nodes.size();
  shard.shared = shared;
  for (size_t i = 0; i < nodes.size(); ++i) {
    shard.worker = i;
    workers.push_back(
      ml::spawn_worker(cfg, shard, "node-" + std::to_string(i + 1)));
  }
  for (auto& w : workers) // each has its shard once it answers
    lumen::get(lumen::call(w, ml::worker_stats_atom::value));
  double after = 0;
  for (auto& n : nodes)
    after += pss_bytes(n.proc->pid());
  for (auto& w : workers) {
    caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    // Gone once a call says so: their shards are let go by then.
    for (;;) {
      try {
        lumen::get(lumen::call(w, ml::worker_stats_atom::value));
      } catch (const lumen::actor_died&) {
        break;
      }
    }
  }
  double rows = smoke ? 10000 : 60000;
  return (after - before) / (rows * (784 * 4 + 4));
}

/// The server in other processes: a head and four nodes, this program.
/// The server in other processes, beside raw TCP on loopback (`tcp`): a
/// 4-byte ping-pong, and an echo of the MLP's gradient.
void across_processes(
  int reps, bool smoke, lumen::bench::tcp_echo& tcp,
  const std::vector<std::unique_ptr<lumen::bench::tcp_echo>>& echoes,
  table& t) {
  char tmpl[] = "/tmp/lumen-ps-bench-XXXXXX";
  std::string token_file = std::string{::mkdtemp(tmpl)} + "/token";
  std::vector<lumen::bench::node_process> procs;
  procs.push_back(
    lumen::bench::serve({"--head", "--port", "0", "--token-file", token_file}));
  for (int i = 0; i < 4; ++i)
    procs.push_back(lumen::bench::serve(
      {"--address", procs[0].address, "--token-file", token_file}));
  lumen::init_options init;
  init.address = procs[0].address;
  init.token_file = token_file;
  lumen::init(init);
  // On the fresh nodes, before anything else there allocates: the shared
  // run first, since the private one's freed copies may linger.
  std::vector<lumen::bench::node_process> nodes;
  for (size_t i = 1; i < procs.size(); ++i)
    nodes.push_back(std::move(procs[i]));
  t.figs.emplace_back("shared_data_pss_ratio", "ratio",
                      std::vector<double>{data_pss_ratio(nodes, true, smoke)},
                      1);
  t.figs.emplace_back("private_data_pss_ratio", "ratio",
                      std::vector<double>{data_pss_ratio(nodes, false, smoke)},
                      1);
  lumen::bench::compare(t.figs[t.figs.size() - 2], t.figs.back());
  for (size_t i = 1; i < procs.size(); ++i)
    procs[i] = std::move(nodes[i - 1]);
  // node-5 and node-6, which share no memory with other processes.
  for (int i = 0; i < 2; ++i)
    procs.push_back(lumen::bench::serve(
      {"--address", procs[0].address, "--token-file", token_file},
      {"LUMEN_SHARED_MEMORY=0"}));
  ml::mlp net{784, {256, 128}, 10};
  ml::ps_config cfg; // sync, one worker: each push closes a step
  cfg.optimizer.lr = 1e-6f;
  auto ps = ml::spawn_parameter_server(cfg, net.init(1), "node-1");
  ml::tensor g({static_cast<int64_t>(net.num_params())});
  long n = smoke ? 2 : 100;
  uint64_t at = 0; // each repetition goes on from the last one's version
  std::vector<char> payload(mlp_gradient_bytes, 'x'), back;
  auto [rts, echo] = paired_rates(
    reps, n,
    [&] {
      for (long i = 0; i < n; ++i) {
        auto [v, w] = lumen::get(lumen::call(ps, ml::push_atom::value, at, g));
        verify(v == at + 1 && w.numel() == net.num_params(),
               "the MLP's weights came back");
        at = v;
      }
    },
    [&] {
      for (long i = 0; i < n; ++i)
        tcp.round_trip(payload, back);
    });
  for (auto* rates : {&rts, &echo}) // MB/s, both directions
    for (auto& r : *rates)
      r *= 2.0 * mlp_gradient_bytes / 1e6;
  figure tcp_echo_mlp{"tcp_echo_mlp", "MB/s", echo, n,
                      long(mlp_gradient_bytes)};
  t.figs.emplace_back("ps_roundtrip_mlp", "MB/s", rts, n,
                      long(mlp_gradient_bytes));
  lumen::bench::compare(t.figs.back(), tcp_echo_mlp);
  auto tiny = ml::spawn_parameter_server(cfg, {0.0f}, "node-1");
  long calls = smoke ? 200 : 5000;
  std::vector<char> small(4);
  auto [pulls, pings] = paired_rates(
    reps, calls,
    [&] {
      for (long i = 0; i < calls; ++i)
        lumen::get(lumen::call(tiny, ml::pull_atom::value));
    },
    [&] {
      for (long i = 0; i < calls; ++i)
        tcp.round_trip(small, back);
    });
  figure tcp_pingpong{"tcp_pingpong", "ops/s", pings, calls};
  t.figs.emplace_back("ps_small_requests", "ops/s", pulls, calls);
  lumen::bench::compare(t.figs.back(), tcp_pingpong);
  // As a caller with many refs in flight (Ray's usual pattern) sees it.
  constexpr long window = 64;
  t.figs.emplace_back(
    "ps_small_requests_pipelined", "ops/s",
    lumen::bench::rate(
      reps, calls,
      [&] {
        std::vector<lumen::ObjectRef<std::tuple<uint64_t, ml::tensor>>> refs;
        for (long i = 0; i < calls; ++i) {
          refs.push_back(lumen::call(tiny, ml::pull_atom::value));
          if (refs.size() == window) {
            for (auto& r : refs)
              lumen::get(r);
            refs.clear();
          }
        }
        for (auto& r : refs)
          lumen::get(r);
      }),
    calls);
  lumen::bench::compare(t.figs.back(), tcp_pingpong);
  t.figs.push_back(tcp_pingpong);
  t.figs.push_back(tcp_echo_mlp);
  // A 10M-parameter model's pushes, to 1, 2 and 4 shards on nodes of
  // their own.
  size_t params = smoke ? 10000 : 10000000;
  std::vector<float> start(params, 0.0f);
  ml::tensor big({static_cast<int64_t>(params)});
  // Beside them, the same bytes split over as many raw TCP echo servers,
  // a thread each: what this machine's loopback gives such a split.
  std::vector<char> whole(params * sizeof(float), 'x');
  // Every split is measured in turns with the others: the figure is
  // their ratio. The shards on nodes 1-4 share memory with this process;
  // those on nodes 5 and 6 keep to their sockets, as shards on other
  // hosts do.
  const std::vector<size_t> splits{1, 2, 4};
  constexpr size_t socket_splits = 2; // 1 and 2 shards
  long pushes = smoke ? 2 : 10;
  std::vector<ml::sharded_server> servers;
  std::vector<uint64_t> versions(splits.size() + socket_splits, 0);
  std::vector<std::vector<std::vector<char>>> out(splits.size()),
    in(splits.size());
  for (size_t i = 0; i < splits.size(); ++i) {
    std::vector<std::string> nodes;
    for (size_t k = 0; k < splits[i]; ++k) {
      nodes.push_back("node-" + std::to_string(k + 1));
      auto r = ml::shard_range(whole.size(), splits[i], k);
      out[i].emplace_back(whole.begin() + long(r.begin),
                          whole.begin() + long(r.end));
    }
    in[i].resize(splits[i]);
    servers.emplace_back(cfg, start, nodes);
  }
  for (size_t i = 0; i < socket_splits; ++i) {
    std::vector<std::string> nodes;
    for (size_t k = 0; k < splits[i]; ++k)
      nodes.push_back("node-" + std::to_string(k + 5));
    servers.emplace_back(cfg, start, nodes);
  }
  std::vector<std::function<void()>> runs;
  for (size_t i = 0; i < servers.size(); ++i)
    runs.push_back([&, i] {
      for (long p = 0; p < pushes; ++p)
        versions[i] = std::get<0>(servers[i].push(versions[i], big));
    });
  // Split i's pushes done by `part(i, k)` for each of its parts k, a
  // thread each.
  auto split_run = [&](size_t i, std::function<void(size_t, size_t)> part) {
    return [&, i, part] {
      for (long p = 0; p < pushes; ++p) {
        std::vector<std::thread> threads;
        for (size_t k = 0; k < splits[i]; ++k)
          threads.emplace_back(part, i, k);
        for (auto& th : threads)
          th.join();
      }
    };
  };
  for (size_t i = 0; i < splits.size(); ++i)
    runs.push_back(split_run(i, [&](size_t i, size_t k) {
      echoes[k]->round_trip(out[i][k], in[i][k]);
    }));
  // And what this machine's memory gives a split: the push's bytes copied
  // by as many threads, each its part. Every stage of a push on one host
  // streams memory, so that this ratio bounds the shards' ratio.
  std::vector<char> copy_to(whole.size());
  for (size_t i = 0; i < splits.size(); ++i)
    runs.push_back(split_run(i, [&](size_t i, size_t k) {
      auto r = ml::shard_range(whole.size(), splits[i], k);
      std::memcpy(copy_to.data() + r.begin, whole.data() + r.begin, r.size());
    }));
  // A push first, untimed: each link maps its pages at its first blocks.
  for (size_t i = 0; i < servers.size(); ++i)
    versions[i] = std::get<0>(servers[i].push(versions[i], big));
  auto rates = interleaved_rates(reps, pushes, runs);
  // Each group's figures, one per split, compared with its 1-way one.
  auto report = [&](const char* name, size_t from, size_t count) {
    size_t first = t.figs.size();
    for (size_t i = 0; i < count; ++i) {
      auto n = std::to_string(splits[i]);
      t.figs.emplace_back(name, "ops/s", rates[from + i], pushes,
                          long(params * sizeof(float)));
      auto& f = t.figs.back();
      f.label = std::string{name} + "_n" + n;
      f.extra = {{"shards", n}};
      if (i > 0)
        lumen::bench::compare(f, t.figs[first]);
    }
  };
  report("shard_pushes_per_s", 0, splits.size());
  report("shard_pushes_sockets", splits.size(), socket_splits);
  report("tcp_sharded_echo", splits.size() + socket_splits, splits.size());
  report("memcpy_split", 2 * splits.size() + socket_splits, splits.size());
  lumen::shutdown();
  for (auto& p : procs)
    p.proc->kill(SIGTERM);
}

} // namespace

int main(int argc, char** argv) {
  lumen::util::use_huge_pages();
  // `ps_bench --serve start ...`: this program as a head or a node.
  if (argc > 1 && std::string{argv[1]} == "--serve")
    return lumen::cli_main(argc - 1, argv + 1);
  auto opts = lumen::bench::parse_options(
    argc, argv,
    "ps_bench: the parameter server's figures on Fashion-MNIST\n"
    "  --plot=FILE  the stragglers' loss against time (ps_bench_loss.svg)\n"
    "  --only=GROUP stragglers, no_straggler, tail, codecs, prefetch,\n"
    "               accuracy, simulated or processes");
  std::string plot_path = opts.smoke ? "" : "ps_bench_loss.svg";
  std::string only; // a group of figures, or all
  for (auto& flag : opts.rest) {
    if (flag.rfind("--plot=", 0) == 0) {
      plot_path = flag.substr(7);
    } else if (flag.rfind("--only=", 0) == 0) {
      only = flag.substr(7);
    } else {
      std::fprintf(stderr, "ps_bench: unknown flag '%s'; see --help\n",
                   flag.c_str());
      return 2;
    }
  }
  // Each repetition trains with seeds of its own: a training figure's
  // spread is over that many draws (five by default).
  int reps = opts.reps;
  try {
    lumen::bench::tcp_echo tcp; // forks: before any thread
    std::vector<std::unique_ptr<lumen::bench::tcp_echo>> echoes;
    while (echoes.size() < 4 && (only.empty() || only == "processes"))
      echoes.push_back(std::make_unique<lumen::bench::tcp_echo>());
    lumen::init();
    auto d = load(opts.smoke);
    scale z;
    z.mlp = {"mlp", 784, {opts.smoke ? 16u : 128u}, 10};
    z.softmax = {"softmax_regression", 784, {}, 10};
    z.big_mlp = {"mlp", 784, {256, 128}, 10};
    z.steps = opts.smoke ? 20 : 500;
    // The p99 of 2,000 steps is the mean of their 20 longest.
    z.tail_steps = opts.smoke ? 20 : 2000;
    z.accuracy_steps = opts.smoke ? 20 : 3000;
    z.big_steps = opts.smoke ? 10 : 1800;
    if (opts.smoke)
      z.big_mlp.hidden = {8};
    table t;
    auto wanted = [&](const char* group) {
      return only.empty() || only == group;
    };
    for (int r = 0; r < reps; ++r) {
      z.seed = 1 + static_cast<uint64_t>(r);
      std::vector<ml::series> curves;
      bool plot = r == 0 && !plot_path.empty() && wanted("stragglers");
      if (wanted("stragglers"))
        stragglers(d, z, t, plot ? &curves : nullptr);
      if (plot)
        ml::write_svg_plot(plot_path,
                           "Loss with one of 4 workers 3x slower "
                           "(Fashion-MNIST MLP; mean over 200 gradients)",
                           "seconds", "test loss", curves);
      if (wanted("no_straggler"))
        no_straggler(d, z, t);
      if (wanted("tail"))
        tail(d, z, t);
      if (wanted("codecs"))
        codecs(d, z, t);
      if (wanted("prefetch"))
        prefetch(d, z, t);
      if (wanted("accuracy"))
        accuracy(d, z, t);
    }
    lumen::shutdown();
    // The straggler and tail runs again, each worker and the server on a
    // simulated node of its own, as on machines that share no cores:
    // virtual time, compute charged by the FLOPs, 10 Gbit/s links.
    if (wanted("simulated")) {
      table sim;
      sim.suffix = "_sim";
      for (int r = 0; r < reps; ++r) {
        z.seed = 1 + static_cast<uint64_t>(r);
        lumen::init_options cluster;
        cluster.sim.enabled = true;
        cluster.sim.seed = z.seed;
        cluster.sim.nodes = 6; // the server's and five workers'
        lumen::init(cluster);
        stragglers(d, z, sim, nullptr);
        tail(d, z, sim);
        lumen::shutdown();
      }
      for (auto& f : sim.figs)
        t.figs.push_back(std::move(f));
    }
    if (wanted("processes"))
      across_processes(opts.reps, opts.smoke, tcp, echoes, t);
    for (auto& f : t.figs)
      for (auto v : f.samples)
        verify(std::isfinite(v), f.name + " is a number");
    lumen::bench::print("ps_bench", t.figs, opts.json);
    if (!plot_path.empty() && !opts.json && wanted("stragglers"))
      std::printf("loss against time: %s\n", plot_path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps_bench: %s\n", e.what());
    lumen::shutdown();
    return 1;
  }
  return 0;
}
