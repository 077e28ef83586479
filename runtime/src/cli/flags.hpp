#pragma once

// Command-line flags on CLI11, shared by `lumen::init(argc, argv)` and the
// `lumen` command, so that a flag means one thing and reads one way
// everywhere (`--flag value` or `--flag=value`).

#include <string>

#include <CLI/CLI.hpp>

#include "lumen/init.hpp"

namespace lumen::detail {

/// Adds `--num-cpus`, `--address`, `--token-file` and the TLS flags to
/// `app`, writing into `opts`.
void add_init_flags(CLI::App& app, init_options& opts);

/// Adds `--tls`, `--tls-cert`, `--tls-key` and `--tls-ca`.
void add_tls_flags(CLI::App& app, tls_options& tls);

/// Refuses an empty value: `--host ""` is a mistake, not a default.
CLI::Validator non_empty();

} // namespace lumen::detail
