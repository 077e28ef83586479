#pragma once

#include "lumen/init.hpp"

namespace lumen::detail {

/// Parses `lumen::init`'s command-line flags, leaving every argument that
/// does not start with `--` to the program if `positional`; throws
/// `usage_error` naming a bad or unknown flag (or argument). Sets `help` if
/// `--help` was given.
init_options parse_init_flags(int argc, char** argv, bool& help,
                              bool positional = true);

} // namespace lumen::detail
