#pragma once

// Part 04c's checks: the learner's replicas (an actor with `step(k)`
// returning its loss and `weights()`) train 30 steps on the simulated
// cluster of replicas.hpp while node-3 rounds its updates its own way and a
// bit flips in replica 1 at step 12. They must start from the same
// weights, drift between re-broadcasts (which come every 10 steps, not
// every step) and be identical to the bit after each.

#include "replicas.hpp"

#include <lumen/ml/plot.hpp>

namespace scratch04 {

constexpr int drift_steps = 30, rebroadcast_every = 10;

/// The largest |w − rank 0's w| over the replicas and the elements.
inline double drift_of(const std::vector<std::vector<float>>& w) {
  double d = 0;
  for (size_t r = 1; r < w.size(); ++r)
    d = std::max(d, largest_difference(w[r], w[0]));
  return d;
}

/// The learner's replicas under `seed`: "" or what is wrong; each step's
/// drift into `drift` (index 0: before the first step), its loss into
/// `loss`.
template <class Replica>
std::string check_drift(uint64_t seed, std::vector<double>& drift,
                        std::vector<double>& loss) {
  return exercise::in_simulation(replica_network(seed), [&]() -> std::string {
    auto replicas = start_replicas<Replica>();
    drift.push_back(drift_of(weights_of(replicas)));
    if (drift.back() != 0)
      return "before the first step the replicas' weights differ by up to " +
             std::to_string(drift.back()) +
             ": every replica must start from rank 0's (one seed for all, "
             "or a broadcast; see TODO(ml_scratch04c) in the constructor)";
    for (int k = 0; k < drift_steps; ++k) {
      loss.push_back(step_all(replicas, k).front());
      drift.push_back(drift_of(weights_of(replicas)));
    }
    for (int k = 0; k < drift_steps; ++k) {
      auto d = drift[size_t(k) + 1];
      bool rebroadcast = k % rebroadcast_every == rebroadcast_every - 1;
      if (rebroadcast && d != 0)
        return "after step " + std::to_string(k) +
               " the replicas still differ by up to " + std::to_string(d) +
               ": re-broadcast rank 0's weights after every " +
               std::to_string(rebroadcast_every) +
               "th step (see TODO(ml_scratch04c) in step)";
      if (!rebroadcast && k >= 2 && d == 0)
        return "after step " + std::to_string(k) +
               " the replicas are identical, yet nothing re-broadcast them "
               "then: a broadcast costs a whole model on the wire, so do it "
               "every " +
               std::to_string(rebroadcast_every) +
               " steps, not every step (see TODO(ml_scratch04c) in step)";
    }
    if (!(loss.back() < 0.8 * loss.front()))
      return "the loss went from " + std::to_string(loss.front()) + " to " +
             std::to_string(loss.back()) + ", expected 20% lower";
    return "";
  });
}

/// The part's program: --check (three seeds, seed 1's drift as a table),
/// --plot=FILE (seed 1's drift as SVG), --step (two steps, event by event).
template <class Replica>
int main_drift(int argc, char** argv) {
  auto f = exercise::parse_flags(argc, argv, {"--plot="});
  if (!f)
    return 2;
  if (f->step != step_mode::none)
    return show_steps<Replica>(f->step, 2);
  exercise::checker cases;
  exercise::under_each_seed(
    cases, "30 steps, a bit flipped at step 12, node-3 rounding its own way",
    [&](uint64_t seed) {
      std::vector<double> drift, loss;
      auto wrong = check_drift<Replica>(seed, drift, loss);
      if (seed != 1)
        return wrong;
      std::printf("  seed 1: step  loss     largest drift from rank 0\n");
      for (size_t k = 0; k < loss.size(); ++k)
        std::printf("          %4zu  %.4f  %.3g%s\n", k, loss[k], drift[k + 1],
                    k % rebroadcast_every == rebroadcast_every - 1
                      ? "  (re-broadcast)"
                      : "");
      for (auto& own : f->own) {
        lumen::ml::series line{"largest drift", {}, {}};
        for (size_t k = 0; k < drift.size(); ++k) {
          line.x.push_back(double(k));
          line.y.push_back(std::log10(std::max(drift[k], 1e-12)));
        }
        auto path = own.substr(std::string{"--plot="}.size());
        lumen::ml::write_svg_plot(path, "Replicas' drift from rank 0", "step",
                                  "log10 of the largest drift", {line});
        std::printf("  wrote %s\n", path.c_str());
      }
      return wrong;
    });
  return cases.verdict();
}

} // namespace scratch04
