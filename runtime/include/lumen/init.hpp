#pragma once

#include <string>

namespace lumen {

/// How `lumen::init` sets up this process.
struct init_options {
  /// Threads that run tasks; 0 means one per hardware thread.
  int num_cpus = 0;
  /// HOST:PORT of a cluster's head to join; empty starts an embedded
  /// cluster in this process. Defaults to $LUMEN_ADDRESS.
  std::string address;
  /// The cluster token file; defaults to $LUMEN_TOKEN_FILE, else the file
  /// `lumen start --head` writes (~/.lumen/cluster-token).
  std::string token_file;
};

/// Starts an embedded local cluster in this process, or joins the cluster
/// at `--address`. Flags understood: `--num-cpus=N`, `--address=HOST:PORT`,
/// `--token-file=F` and `--help` (prints them and exits 0). Any other flag
/// starting with `--`, or a bad value, prints what is wrong and exits 2, as
/// command-line tools do; parse your own flags first and call
/// `init(init_options)` instead. Throws `usage_error` if already
/// initialized or if remote functions or actors were registered twice.
void init(int argc, char** argv);

/// Like `init(argc, argv)` with the options given in code.
void init(const init_options& opts = {});

/// Ends every actor, stops the workers and frees the runtime. Refs to
/// results that never arrived fail. A no-op if not initialized.
void shutdown();

bool is_initialized();

/// Parses init's command-line flags; throws `usage_error` on a bad one.
/// Sets `help` if --help was given.
init_options parse_init_flags(int argc, char** argv, bool& help);

/// The text `--help` prints.
std::string init_flags_help();

} // namespace lumen
