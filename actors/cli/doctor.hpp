#pragma once

#include <lumen/cli.hpp>

namespace lumen::cli {

/// `lumen doctor --address HOST:PORT`: for a running cluster, every
/// collective group across processes, where each member is (in which
/// operation, or outside any collective and for how long), its last
/// completed operation, and the members behind; `--json` for tools.
cli_verb doctor_verb();

} // namespace lumen::cli
