#pragma once

// Building a learner's file and running what it built, for `lumen
// exercises`: a compile error comes back as its first error on the
// learner's line, a crash or a hang as such, with the last thing the
// program printed.

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "exercise_files.hpp"

namespace lumen::cli {

struct build_result {
  bool ok = false;
  bool rebuilt = false;
  double seconds = 0;
  fs::path program;
  /// For a failed build: the first error, on the learner's line if it is
  /// in their file, and where the compiler's whole output is.
  std::string summary;
};

/// Builds the learner's file of `e` in `ws` unless the program is newer
/// than it and was built the same way.
build_result build(const installation& where, const exercise& e,
                   const workspace& ws);

/// Builds `e`'s reference solution beside the learner's program, in the
/// same way.
build_result build_reference(const installation& where, const exercise& e,
                             const workspace& ws);

struct run_result {
  int exit_code = 0;
  int signal = 0;         // set if a signal ended it
  bool timed_out = false; // ended by us at the deadline
  std::string last_line;  // the last line it printed
  /// The first line of a sanitizer's report (a build with
  /// LUMEN_SANITIZE), which ends the program as a crash would.
  std::string sanitizer_report;

  /// Ended by a signal, a sanitizer or the deadline: not a verdict of its
  /// own code.
  bool broke() const {
    return timed_out || signal != 0 || !sanitizer_report.empty();
  }
};

/// Where a program's output goes as it comes (stdout and stderr, merged).
using output_fn = std::function<void(const char* bytes, size_t n)>;

/// Runs `program` with `args`, passing its output on as it comes, to the
/// terminal or to `sink`. With a deadline (not zero) it reads nothing from
/// the terminal and is ended, with everything it started, once the
/// deadline passes.
run_result run_program(const fs::path& program,
                       const std::vector<std::string>& args,
                       std::chrono::seconds deadline,
                       const output_fn& sink = {});

/// What a run that did not end normally means, for the learner: the
/// signal or the deadline, and the last line it printed.
std::string describe_failure(const run_result& r,
                             std::chrono::seconds deadline);

} // namespace lumen::cli
