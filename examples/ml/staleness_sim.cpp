// staleness_sim: asynchronous SGD with eight workers, stale gradients and
// the fix for them, in virtual time. The simulation is the one the browser
// playground's ml_scratch02 page runs (lumen/ml/sim.hpp): a parameter
// server's real rules (ps_core) and a linear regression, with the time
// each gradient takes drawn from a seed, so the numbers here are the
// page's numbers.
//
//   ./.build/examples/ml/staleness_sim
//
// Prints the loss after 300 updates with the staleness fix off and on, the
// gradients' staleness, and "staleness_sim: all steps ok" once the run
// without the fix diverged and the run with it converged.

#include <iostream>

#include <lumen/ml/sim.hpp>

namespace sim = lumen::ml::sim;

int main() {
  // [simulate]
  sim::ps_sim_config cfg;
  cfg.mode = lumen::ml::ps_mode::async;
  cfg.workers = 8; // each gradient is about 7 versions old when it lands
  cfg.lr = 0.3f;
  cfg.staleness_lr = false; // every gradient at the full learning rate
  sim::ps_sim without_fix{cfg};
  without_fix.run_to(300);
  cfg.staleness_lr = true; // lr divided by the gradient's staleness
  sim::ps_sim with_fix{cfg};
  with_fix.run_to(300);
  // [/simulate]

  for (auto* run : {&without_fix, &with_fix})
    std::cout << "staleness fix " << (run == &with_fix ? "on: " : "off:")
              << " loss " << run->initial_loss() << " -> "
              << run->losses().back().loss << " after "
              << run->server().version() << " updates, " << run->now_ms()
              << " ms of virtual time" << (run->diverged() ? " (diverged)" : "")
              << "\n";
  std::cout << "staleness of the gradients applied (with the fix):";
  for (auto& [staleness, count] : with_fix.server().stats().staleness)
    std::cout << " " << staleness << ":" << count;
  std::cout << "\n";
  bool ok = without_fix.diverged() && !with_fix.diverged() &&
            with_fix.losses().back().loss < with_fix.initial_loss() / 100;
  std::cout << (ok ? "staleness_sim: all steps ok"
                   : "staleness_sim: the runs did not turn out as expected")
            << "\n";
  return ok ? 0 : 1;
}
