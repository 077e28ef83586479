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
// carries: a single server's link takes N·S in, then sends N·S out; a ring
// member's or a co-located shard's host sends and receives 2·S·(N-1)/N.
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

#include "allreduce_procs.hpp"
#include "bench_nodes.hpp"
#include "bench_report.hpp"
#include "netns.hpp"

namespace ml = lumen::ml;
using clock_type = std::chrono::steady_clock;
using lumen::bench::figure;
using lumen::bench::verify;

namespace {

// A worker of the servers: given the server's shards, the gradient's size
// and a count of steps, pushes a gradient to every shard each step (the
// answer brings the new weights) and answers with each step's seconds (a
// float64 tensor: a type every process knows).
using psrun_atom = caf::atom_constant<caf::atom("psrun")>;
using pusher = caf::typed_actor<
  caf::replies_to<psrun_atom, std::vector<ml::parameter_server>, uint64_t,
                  uint32_t>::with<ml::tensor>>;

struct push_run {
  std::vector<ml::parameter_server> shards;
  ml::tensor grad;
  std::vector<uint64_t> versions;
  std::vector<double> took;
  uint32_t steps = 0;
  size_t pending = 0;
  bool failed = false;
  clock_type::time_point start;
  caf::typed_response_promise<ml::tensor> done;
};

/// Pushes one step's parts to every shard at once; the last answer starts
/// the next step.
void push_step(pusher::pointer self, std::shared_ptr<push_run> run) {
  if (run->took.size() == run->steps) {
    ml::tensor out{{int64_t(run->steps)}, ml::dtype::float64};
    std::copy(run->took.begin(), run->took.end(), out.data<double>());
    run->done.deliver(std::move(out));
    return;
  }
  run->start = clock_type::now();
  run->pending = run->shards.size();
  auto numel = run->grad.numel();
  for (size_t i = 0; i < run->shards.size(); ++i) {
    auto part = ml::shard_range(numel, run->shards.size(), i);
    lumen::request(self, run->shards[i], caf::infinite, ml::push_atom::value,
                   run->versions[i], run->grad.rows(part.begin, part.end))
      .then(
        [self, run, i](uint64_t version, ml::tensor) {
          run->versions[i] = version;
          if (--run->pending > 0 || run->failed)
            return;
          run->took.push_back(
            std::chrono::duration<double>(clock_type::now() - run->start)
              .count());
          push_step(self, run);
        },
        [run](caf::error& e) {
          if (!run->failed)
            run->done.deliver(std::move(e));
          run->failed = true;
        });
  }
}

pusher::behavior_type pusher_impl(pusher::pointer self) {
  return {
    [self](psrun_atom, std::vector<ml::parameter_server> shards, uint64_t numel,
           uint32_t steps) -> caf::result<ml::tensor> {
      auto run = std::make_shared<push_run>();
      run->shards = std::move(shards);
      run->grad = ml::tensor{{int64_t(numel)}};
      std::fill(run->grad.data<float>(), run->grad.data<float>() + numel,
                1e-6f);
      run->versions.assign(run->shards.size(), 0);
      run->steps = steps;
      run->done = self->make_response_promise<ml::tensor>();
      push_step(self, run);
      return run->done;
    },
  };
}

LUMEN_TYPED_ACTOR("ps_vs_ring.pusher", pusher_impl);

/// "1M", "10M", "100M", "256K" or a plain count of parameters.
size_t parameters_of(const std::string& text) {
  size_t used = 0;
  auto n = std::stod(text, &used);
  auto unit = text.substr(used);
  double scale = unit == "M" ? 1e6 : unit == "K" ? 1e3 : unit.empty() ? 1 : 0;
  if (scale == 0 || n <= 0)
    throw std::invalid_argument("'" + text +
                                "' is no parameter count; write "
                                "1M, 256K or 1000000");
  return size_t(n * scale);
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
  size_t used = 0;
  auto n = std::stod(rate, &used);
  auto unit = rate.substr(used);
  double bits = unit == "gbit" ? 1e9 : unit == "mbit" ? 1e6 : 0;
  if (bits == 0 || n <= 0)
    throw std::invalid_argument("--rate '" + rate +
                                "': write it as tc does, 1gbit or 100mbit");
  return n * bits / 8;
}

/// --driver HEAD TOKEN N STEPS REPS SIZES...: in the servers' host, joins
/// the cluster, finds each host's node by its address, and times the two
/// servers; prints "FIG name n bytes seconds..." lines.
int run_driver(int argc, char** argv) {
  lumen::init_options opts;
  opts.address = argv[2];
  opts.token_file = argv[3];
  auto n = size_t(std::stoul(argv[4]));
  auto steps = uint32_t(std::stoul(argv[5]));
  auto reps = std::stoi(argv[6]);
  lumen::init(opts);
  // Host i's node: the one whose address is 10.201.0.(i+1).
  std::vector<std::string> node_of(n + 1);
  for (int tries = 0; tries < 300; ++tries) {
    for (auto& node : lumen::nodes())
      for (size_t h = 0; h <= n; ++h)
        if (node.alive && node.id != "head" &&
            node.address.rfind(lumen::test::topology::address(h) + ":", 0) == 0)
          node_of[h] = node.id;
    if (std::none_of(node_of.begin(), node_of.end(),
                     [](auto& id) { return id.empty(); }))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (size_t h = 0; h <= n; ++h)
    verify(!node_of[h].empty(), "a node on host " + std::to_string(h));
  std::vector<pusher> pushers;
  for (size_t w = 1; w <= n; ++w)
    pushers.push_back(lumen::spawn_on<pusher>(node_of[w], "ps_vs_ring.pusher"));
  ml::ps_config cfg;
  cfg.mode = ml::ps_mode::sync;
  cfg.workers = n;
  cfg.optimizer = {ml::optimizer_kind::sgd, 1e-9f};
  cfg.step_timeout_ms = 3600 * 1000; // a large model's step is slow, not lost
  for (int a = 7; a < argc; ++a) {
    auto numel = size_t(std::stoull(argv[a]));
    std::vector<float> initial(numel, 0.0f);
    for (std::string name : {"ps_single", "ps_sharded"}) {
      std::vector<ml::parameter_server> shards;
      std::unique_ptr<ml::sharded_server> sharded;
      if (name == "ps_single") {
        shards.push_back(ml::spawn_parameter_server(cfg, initial, node_of[0]));
      } else {
        sharded = std::make_unique<ml::sharded_server>(
          cfg, initial,
          std::vector<std::string>(node_of.begin() + 1, node_of.end()));
        shards = sharded->servers();
      }
      std::cout << "FIG " << name << " " << n << " " << numel * 4;
      for (int rep = 0; rep < reps; ++rep) {
        // A step more than timed: the first warms the buffers.
        std::vector<lumen::ObjectRef<ml::tensor>> runs;
        for (auto& p : pushers)
          runs.push_back(lumen::call(p, psrun_atom::value, shards,
                                     uint64_t(numel), steps + 1));
        std::vector<double> slowest(steps, 0.0);
        for (auto& r : runs) {
          auto took = lumen::get(r);
          for (size_t s = 0; s < steps; ++s)
            slowest[s] = std::max(slowest[s], took.data<double>()[s + 1]);
        }
        std::sort(slowest.begin(), slowest.end());
        std::cout << " " << slowest[slowest.size() / 2];
      }
      std::cout << std::endl;
      for (auto& s : shards)
        caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
    }
  }
  lumen::shutdown();
  return 0;
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
             std::vector<figure>& figs) {
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
  if (int rc = driver.wait(); rc != 0)
    verify(false, "the servers' driver failed (exit " + std::to_string(rc) +
                    "): " + driver.output());
  read_figures(driver.output(), figs);
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
    double bytes =
      f.name == "ps_single" ? 2 * n * size : 2 * size * (n - 1) / n;
    figure bound{f.name + "_bound", "s", {bytes / rate}, f.n, f.bytes};
    bound.label = f.label + " bound";
    bound.extra = {{"formula", f.name == "ps_single"
                                 ? "\"2·N·S / rate\""
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
  if (argc > 1 && std::string{argv[1]} == "--serve")
    return lumen::cli_main(argc - 1, argv + 1);
  if (argc > 1 && std::string{argv[1]} == "--member")
    return lumen::bench::run_member(argc, argv);
  if (argc > 7 && std::string{argv[1]} == "--driver")
    return run_driver(argc, argv);
  settings s;
  lumen::bench::options opts;
  double rate = 0;
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
      "  --plot=FILE            the SVG of the largest N (ps_vs_ring.svg)");
    if (!reps_given && !opts.smoke)
      opts.reps = 3;
    for (auto& flag : opts.rest) {
      auto value = flag.substr(flag.find('=') + 1);
      if (flag.rfind("--workers=", 0) == 0)
        s.workers = list_of<size_t>(value, [](const std::string& t) {
          auto w = size_t(std::stoul(t));
          if (w < 2 || w > 8)
            throw std::invalid_argument("--workers takes 2 to 8 each");
          return w;
        });
      else if (flag.rfind("--params=", 0) == 0)
        s.params = list_of<size_t>(value, parameters_of);
      else if (flag.rfind("--rate=", 0) == 0)
        s.rate = value;
      else if (flag.rfind("--plot=", 0) == 0)
        s.plot = value;
      else
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
      measure(s, opts, n, measured);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps_vs_ring: %s\n", e.what());
    return 1;
  }
  auto figs = with_bounds(measured, rate);
  lumen::bench::print("ps_vs_ring", figs, opts.json);
  draw(s.plot, figs, s.workers.back());
  std::fprintf(stderr, "ps_vs_ring: plot %s\n", s.plot.c_str());
  return 0;
}
