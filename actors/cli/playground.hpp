#pragma once

#include <lumen/cli.hpp>

namespace lumen::cli {

/// `lumen playground [ID]`: where the browser playground's page of an
/// exercise (or its index) is, as a file:// address, and `--open` to open
/// it in the desktop's browser.
cli_verb playground_verb();

} // namespace lumen::cli
