#pragma once

// Checking a learner's file for `lumen exercises`: building it, running its
// checker and recording the verdict, explaining a failure against the
// reference's run, and a run on the live page.

#include <chrono>
#include <string>
#include <vector>

#include "exercise_build.hpp"
#include "exercise_files.hpp"

namespace lumen::cli {

class live_page;

/// What the commands work on: where Lumen and the exercises are, the
/// parts, the learner's folder.
struct session {
  installation where;
  std::vector<exercise> all;
  workspace ws;
  // The checker's cases take a few seconds: a run far longer is stuck
  // (`--deadline`).
  std::chrono::seconds deadline;
};

/// The first exercise in order that does not pass yet, or null.
const exercise* next_to_do(const session& s);

/// Builds `e`; on failure prints why and returns false.
bool built(const session& s, const exercise& e, build_result& out);

/// Checks `e`, records the verdict and says what next; true if it passes.
/// With `transcript`, what the checker and the explanation said goes
/// there too.
bool check(session& s, const exercise& e, std::string* transcript = nullptr);

/// A run of `e` on the live page (run `number`, the file saved at
/// `saved`): its --step=json lines as they come, then the check's
/// verdict; the terminal shows the check as `watch` does.
bool run_live(session& s, const exercise& e, live_page& page, int number,
              const std::string& saved);

} // namespace lumen::cli
