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
/// at `--address`. Flags understood: `--num-cpus N`, `--address HOST:PORT`,
/// `--token-file F` (also as `--flag=value`) and `--help` (prints them and
/// exits 0). As command-line tools do, it prints what is wrong and exits
/// when it cannot start: 2 for misuse (any other flag starting with `--`,
/// a bad value, a bad token file, a second init), 1 for a failure (the
/// head cannot be reached or refuses the token). To handle those yourself,
/// parse your own flags and call `init(init_options)`.
void init(int argc, char** argv);

/// Like `init(argc, argv)` with the options given in code, but throws
/// instead of exiting: `usage_error` for misuse, `error` otherwise, each
/// with an `errc` code and a message saying what to do.
void init(const init_options& opts = {});

/// Ends every actor, stops the workers and frees the runtime. Refs to
/// results that never arrived fail. A no-op if not initialized.
void shutdown();

bool is_initialized();

} // namespace lumen
