#pragma once

#include <lumen/cli.hpp>

namespace lumen::cli {

/// `lumen exercises`: the four exercises' loop (progress, list, show,
/// run, check, hint, watch, reset) over a folder of the learner's own.
cli_verb exercises_verb();

} // namespace lumen::cli
