#pragma once

namespace lumen {

/// The `lumen` command line: `start` (a head or a node), `status`, `stop`.
/// A program of yours serves as a node, with its own remote functions and
/// actors, by passing its arguments here: `./myjob start --address H:P`.
/// Returns the exit code: 0 done, 1 failed, 2 bad usage.
int cli_main(int argc, char** argv);

} // namespace lumen
