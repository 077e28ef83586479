#pragma once

// The faults a simulated run is given before it starts: `--sim-fault`
// flags and a `--sim-faults` file in the same words, and `--sim-chaos`'s
// rates (lumen/sim.hpp says what each means).

#include <string>
#include <vector>

#include "lumen/init.hpp"

#include "sim/sim_world.hpp"

namespace lumen::detail::sim {

struct fault {
  enum class kind { kill, restart, partition, slow };
  kind what = kind::kill;
  vtime at = 0;
  /// The node (the side, for a partition), by name.
  std::vector<std::string> nodes;
  vtime lasting = 0; // a partition's, a slowdown's (0: to the end)
  double factor = 1; // a slowdown's
  /// Where it was given, for errors about it ("--sim-fault 'at=...'").
  std::string source;
};

/// One fault in `--sim-fault`'s words (`at=2s,kill=node-1`); throws
/// `usage_error` saying what is wrong.
fault parse_fault(const std::string& text);

/// The faults of `opts.faults`, then those of `opts.faults_file`.
std::vector<fault> read_faults(const sim_options& opts);

/// `--sim-chaos`'s rates, faults a virtual second over the cluster.
struct chaos_rates {
  double kill = 0;
  double partition = 0;
  double slow = 0;
};

/// Parses `kill=R,partition=R,slow=R` (any of them); throws `usage_error`.
chaos_rates parse_chaos(const std::string& text);

} // namespace lumen::detail::sim
