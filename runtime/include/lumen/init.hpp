#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lumen {

/// How links between this process and the cluster's other processes are
/// secured. Off, they are plain TCP behind the token handshake. On, both the
/// control and the data plane run over TLS 1.3: with certificate files,
/// every process shows its certificate and checks the peer's against the
/// CA; without, the keys come from the cluster token (a pre-shared key), so
/// the token never crosses the wire. Every process of a cluster must agree.
struct tls_options {
  /// Defaults to on when $LUMEN_TLS is 1, or when a certificate is given.
  bool enabled = false;
  /// PEM certificate (chain) this process shows; $LUMEN_TLS_CERT.
  std::string cert_file;
  /// PEM private key of `cert_file`; $LUMEN_TLS_KEY.
  std::string key_file;
  /// PEM certificates a peer's must chain to; $LUMEN_TLS_CA, else
  /// `cert_file` itself (one self-signed certificate for the cluster).
  std::string ca_file;
};

/// A simulated cluster in this process instead of a real one
/// (lumen/sim.hpp).
struct sim_options {
  /// `--simulate[=SEED]`, or $LUMEN_SIMULATE=SEED.
  bool enabled = false;
  uint64_t seed = 1;
  /// Simulated nodes, "node-0" to "node-<N-1>"; the script itself (the
  /// driver) runs on node-0. `--sim-nodes`.
  int nodes = 3;
  /// Every link between two nodes: its one-way latency and its bandwidth
  /// in bytes per second (a 10 Gbit/s LAN by default).
  /// `--sim-link=LATENCY,BANDWIDTH`, e.g. `1ms,1Gbit`.
  std::chrono::nanoseconds latency{std::chrono::microseconds(50)};
  double bandwidth = 1.25e9;
  /// Up to this much more latency for each message, drawn from the seed; a
  /// link still delivers in order, as TCP does. `--sim-jitter`.
  std::chrono::nanoseconds jitter{0};
  /// Nodes slower than the rest: id -> factor (3: its compute takes three
  /// times as long). `--sim-slow=node-2=3,...`.
  std::map<std::string, double> slow{};
  /// Faults on a schedule, each in `--sim-fault`'s words
  /// (`at=2s,kill=node-1`; lumen/sim.hpp lists them), and a JSON file of
  /// more (`--sim-faults=FILE`: an array of objects with the same keys).
  std::vector<std::string> faults{};
  std::string faults_file{};
  /// Faults drawn from the seed: `--sim-chaos=kill=R,partition=R,slow=R`,
  /// each kind's rate per virtual second over the cluster (lumen/sim.hpp).
  std::string chaos{};
  /// Where to write the run's events, a JSON object a line. `--sim-log`.
  std::string log_file{};
  /// A log to check the run against: the run stops with an error at the
  /// first event that differs, naming it. `--sim-replay`.
  std::string replay_file{};
};

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
  /// Whether links to the cluster use TLS, and with which certificates.
  tls_options tls;
  /// Without an address: node processes to start on this machine, making
  /// the embedded cluster one of processes (work placed on a node runs in
  /// a process of its own, as Ray's local workers do). Each is this
  /// program run again with the same arguments, which becomes a node at
  /// its lumen::init, so what main does before init runs there too.
  /// This process is their head; they end with it, and lumen::nodes()
  /// lists them ("node-1", ...) once init returns.
  int local_nodes = 0;
  /// Where to write a timeline of the run, as Chrome trace-event JSON (it
  /// loads in Perfetto and chrome://tracing): a row per actor and task
  /// thread, a span per task and method call, arrows from each submission
  /// to its run, across processes too. Written at lumen::shutdown() by the
  /// driver, with the part of every node it reached, on its clock. Empty
  /// (the default, unless $LUMEN_TRACE is set) records nothing.
  std::string trace_file{};
  /// What this process offers to work that asks for resources
  /// (`with_resources`): name -> amount, e.g. {{"gpu", 2}}. "cpu" defaults
  /// to the task threads. A node advertises them in `lumen status`.
  std::map<std::string, double> resources{};
  /// A simulated cluster instead (lumen/sim.hpp); off by default.
  sim_options sim{};
};

/// Starts an embedded local cluster in this process, or joins the cluster
/// at `--address`. Flags understood: `--num-cpus N`, `--resources K=V,...`,
/// `--address HOST:PORT`,
/// `--local-nodes N`, `--token-file F`, `--tls`, `--tls-cert F`,
/// `--tls-key F`, `--tls-ca F`, `--trace F`, `--simulate[=SEED]`,
/// `--sim-nodes N`, `--sim-link L,B`, `--sim-jitter D`, `--sim-slow ID=F,...`,
/// `--sim-fault K=V,...`, `--sim-faults F`, `--sim-chaos K=R,...`,
/// `--sim-log F`, `--sim-replay F`
/// (also as `--flag=value`) and `--help` (prints them and
/// exits 0). As command-line tools do, it prints what is wrong and exits
/// when it cannot start: 2 for misuse (any other flag starting with `--`,
/// a bad value, a bad token file, a second init), 1 for a failure (the
/// head cannot be reached or refuses the token). To handle those yourself,
/// parse your own flags and call `init(init_options)`.
void init(int argc, char** argv);

/// For a program with flags of its own (parsed first, leaving the rest):
/// the options `init(argc, argv)` would take from `args`, so that a flag
/// means the same in every Lumen program. Throws `usage_error` naming an
/// argument that is not one of init's flags, or a bad value, with
/// init_flags_help() in the message.
init_options parse_init_flags(const std::vector<std::string>& args);

/// init's flags and what each does, as `--help` prints them.
std::string init_flags_help();

/// Like `init(argc, argv)` with the options given in code, but throws
/// instead of exiting: `usage_error` for misuse, `error` otherwise, each
/// with an `errc` code and a message saying what to do.
void init(const init_options& opts = {});

/// Ends every actor, stops the workers and frees the runtime. Refs to
/// results that never arrived fail. A no-op if not initialized.
void shutdown();

bool is_initialized();

} // namespace lumen
