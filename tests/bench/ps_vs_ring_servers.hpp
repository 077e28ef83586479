#pragma once

// ps_vs_ring's servers: the workers that push to them, typed actors on
// the hosts' nodes, and the driver (this benchmark run again with
// --driver in the servers' host) that spawns them and times their steps.

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>
#include <lumen/ml/parameter_server.hpp>
#include <lumen/ml/sharded_server.hpp>

#include "bench_report.hpp"
#include "netns.hpp"

namespace lumen::bench::ps_vs_ring {

namespace ml = lumen::ml;
using clock_type = std::chrono::steady_clock;
using lumen::bench::verify;

// A worker of the servers: given the server's shards, their version, the
// gradient's size and a count of steps, pushes a gradient to every shard
// each step (the answer brings the new weights) and answers with each
// step's seconds (a float64 tensor: a type every process knows).
using psrun_atom = caf::atom_constant<caf::atom("psrun")>;
using pusher = caf::typed_actor<
  caf::replies_to<psrun_atom, std::vector<ml::parameter_server>, uint64_t,
                  uint64_t, uint32_t>::with<ml::tensor>>;

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
inline void push_step(pusher::pointer self, std::shared_ptr<push_run> run) {
  if (run->took.size() == run->steps) {
    ml::tensor out{{int64_t(run->steps)}, ml::dtype::float64};
    std::copy(run->took.begin(), run->took.end(), out.data<double>());
    run->done.deliver(std::move(out));
    return;
  }
  run->start = clock_type::now();
  run->pending = run->shards.size();
  auto numel = run->grad.numel();
  lumen::sends_at_once at_once; // as data_parallel_worker pushes
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

inline pusher::behavior_type pusher_impl(pusher::pointer self) {
  return {
    [self](psrun_atom, std::vector<ml::parameter_server> shards,
           uint64_t version, uint64_t numel,
           uint32_t steps) -> caf::result<ml::tensor> {
      auto run = std::make_shared<push_run>();
      run->shards = std::move(shards);
      run->grad = ml::tensor{{int64_t(numel)}};
      std::fill(run->grad.data<float>(), run->grad.data<float>() + numel,
                1e-6f);
      run->versions.assign(run->shards.size(), version);
      run->steps = steps;
      run->done = self->make_response_promise<ml::tensor>();
      push_step(self, run);
      return run->done;
    },
  };
}

LUMEN_TYPED_ACTOR("ps_vs_ring.pusher", pusher_impl);

/// --driver HEAD TOKEN N STEPS REPS SIZES...: in the servers' host, joins
/// the cluster, finds each host's node by its address, and times the two
/// servers; prints "FIG name n bytes seconds..." lines.
inline int run_driver(int argc, char** argv) {
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
                                     uint64_t(rep) * (steps + 1),
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
  std::cout << "DONE" << std::endl;
  lumen::shutdown();
  return 0;
}

} // namespace lumen::bench::ps_vs_ring
