#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace lumen {

/// A verb of the `lumen` command that a library above the runtime brings
/// (`lumen train`, `lumen exercises`): the runtime knows its name and
/// summary, for `lumen --help`, and hands it its arguments.
struct cli_verb {
  std::string name;
  std::string summary; // one line
  /// Runs the verb: argv[0] is its name, the rest its own arguments
  /// (`--help` included). Returns the exit code.
  std::function<int(int argc, char** argv)> run;
};

/// The `lumen` command line: `start` (a head or a node), `status`, `stop`,
/// and `verbs`. A program of yours serves as a node, with its own remote
/// functions and actors, by passing its arguments here:
/// `./myjob start --address H:P`.
/// Returns the exit code: 0 done, 1 failed, 2 bad usage.
int cli_main(int argc, char** argv, const std::vector<cli_verb>& verbs = {});

/// Parses a verb's flags the way every `lumen` verb does: `parse` calls
/// CLI11's `App::parse`; `--help` prints `help()` and means exit 0; a bad
/// flag prints "lumen VERB: what went wrong" and the line `next` ("Run
/// `lumen VERB --help` for the flags.") to stderr and means exit 2.
/// Returns that exit code, or nothing when the verb goes on.
std::optional<int> parse_verb(const std::string& verb,
                              const std::function<void()>& parse,
                              const std::function<std::string()>& help,
                              const std::string& next);

} // namespace lumen
