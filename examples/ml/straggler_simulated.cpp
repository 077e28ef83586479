// A straggler and a backup worker, on a simulated cluster.
//
// Teaches: the ML layer's typed actors run unchanged on a simulated
// cluster: a sync parameter server on node-0, three data-parallel workers
// on node-1 to node-3, where node-3 computes three times as slowly
// (`--sim-slow=node-3=3`). With one backup worker the server closes each
// step with the first two gradients, so the straggler's always come late
// and are dropped: exactly those, under every seed, and the same seed
// gives the same run to the last gradient.
//
// Run:   ./.build/examples/ml/straggler_simulated --simulate=1 --sim-nodes=4
//          --sim-slow=node-3=3
// Prints each worker's node, gradients applied and dropped, the virtual
// time, then "straggler_simulated: all steps ok".

#include <iostream>
#include <string>
#include <vector>

#include <lumen/caf_interop.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>
#include <lumen/sim.hpp>

namespace ml = lumen::ml;

int main(int argc, char** argv) {
  lumen::init(argc, argv);
  if (!lumen::sim::active() || lumen::nodes().size() < 4) {
    std::cerr << "run me with --simulate[=SEED] --sim-nodes=4 "
                 "--sim-slow=node-3=3\n";
    return 2;
  }
  // [straggler]
  auto problem = ml::make_linear_regression(3000, 4, 5, 0.001f);
  ml::worker_config wc;
  wc.model = {"linear_regression", 4, {}, 1};
  wc.batch_size = 100;
  std::vector<ml::data_parallel_worker> workers;
  for (size_t w = 0; w < 3; ++w)
    workers.push_back(ml::spawn_worker(wc, ml::shard_of(problem.data, w, 3, 2),
                                       "node-" + std::to_string(w + 1)));
  ml::ps_config cfg; // sync: a step closes with 3 - backup gradients
  cfg.workers = 3;
  cfg.backup = 1;
  cfg.optimizer.lr = 0.2f;
  auto ps =
    ml::spawn_parameter_server(cfg, ml::linear_regression{4}.init(0), "node-0");
  std::vector<lumen::ObjectRef<ml::worker_report>> runs;
  for (auto& w : workers)
    runs.push_back(lumen::call(w, ml::train_atom::value, ps, uint64_t{300}));
  auto reports = lumen::get(runs); // the script steps the run meanwhile
  // [/straggler]
  bool ok = true;
  for (size_t w = 0; w < reports.size(); ++w) {
    auto& r = reports[w];
    std::cout << "worker on node-" << w + 1 << ": " << r.pushed
              << " gradients applied, " << r.refused << " dropped as late\n";
    bool straggler = w == 2;
    ok = ok && (straggler ? r.pushed == 0 && r.refused == r.steps
                          : r.pushed == 300 && r.refused == 0);
  }
  std::cout << "300 steps in " << lumen::sim::now().count() / 1000
            << " us of virtual time\n";
  lumen::shutdown();
  std::cout << (ok ? "straggler_simulated: all steps ok"
                   : "straggler_simulated: the drops were not the straggler's")
            << "\n";
  return ok ? 0 : 1;
}
