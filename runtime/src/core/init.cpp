#include "lumen/init.hpp"
#include "lumen/node_shared.hpp"

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "lumen/detail/init_flags.hpp"
#include "lumen/detail/registry.hpp"
#include "lumen/errors.hpp"
#include "lumen/trace.hpp"

#include "lumen/cluster.hpp"

#include "cluster/local_nodes.hpp"
#include "core/log.hpp"
#include "core/node_setup.hpp"
#include "core/process_runtime.hpp"
#include "core/scheduling.hpp"
#include "security/credentials.hpp"
#include "security/token.hpp"
#include "sim/sim_runtime.hpp"
#include "trace/trace_session.hpp"

namespace lumen {

namespace {

std::mutex init_mtx;
std::unique_ptr<detail::process_runtime> the_runtime; // under init_mtx
// The embedded cluster's node processes, if it has any; under init_mtx.
std::unique_ptr<detail::local_nodes> the_local_nodes;
// What the API reads, lock-free; cleared before the runtime is torn down,
// so that calls made during shutdown fail cleanly.
std::atomic<detail::process_runtime*> live_runtime{nullptr};
// The timeline this process records as a driver, if asked; under init_mtx.
std::unique_ptr<detail::trace_session> the_trace;
// A simulated cluster instead of the runtime (lumen/sim.hpp); under
// init_mtx, and read lock-free through live_sim.
std::unique_ptr<detail::sim_runtime> the_sim;
std::atomic<detail::sim_runtime*> live_sim{nullptr};

// Ends the runtime at exit for programs that forget lumen::shutdown(), on
// a thread of its own: by now the main thread's thread-locals are gone,
// CAF's current-logger pointer among them, and an actor system torn down
// here would release that pointer's logger a second time.
struct shutdown_at_exit {
  ~shutdown_at_exit() {
    if (live_runtime.load() != nullptr || live_sim.load() != nullptr)
      std::thread{[] { shutdown(); }}.join();
  }
} shutdown_guard;

/// The runtime of `role`, assembled.
std::unique_ptr<detail::process_runtime>
make_runtime(const init_options& opts, detail::cluster_role role) {
  using detail::cluster_role;
  auto creds =
    role.kind == cluster_role::embedded
      ? detail::credentials{}
      : detail::make_credentials(role.token, detail::resolve_tls(opts.tls));
  switch (role.kind) {
    case cluster_role::embedded:
      return std::make_unique<detail::process_runtime>(opts, false);
    case cluster_role::driver: {
      auto rt = std::make_unique<detail::process_runtime>(opts, true);
      rt->join_as_driver(role.head_address, creds, role.hello_role);
      return rt;
    }
    case cluster_role::head:
    case cluster_role::node: {
      role.serve.is_head = role.kind == cluster_role::head;
      auto rt = std::make_unique<detail::process_runtime>(opts, true);
      rt->join_as_node(role.serve, role.head_address, creds);
      return rt;
    }
  }
  throw usage_error("unknown cluster role");
}

} // namespace

void init(int argc, char** argv) {
  bool help = false;
  init_options opts;
  // Command-line convention: what the user must fix exits 2, a failure 1,
  // each with the message, instead of an uncaught exception's abort.
  try {
    opts = detail::parse_init_flags(argc, argv, help);
    if (help) {
      std::cout << init_flags_help();
      std::exit(0);
    }
    init(opts);
  } catch (const usage_error& e) {
    std::cerr << e.what() << "\n";
    std::exit(2);
  } catch (const error& e) {
    std::cerr << "lumen::init: " << e.what() << "\n";
    std::exit(1);
  }
}

namespace {

/// Starts this process's role in a cluster, or the embedded one.
void start_role(const init_options& opts) {
  detail::cluster_role role;
  auto address = opts.address;
  if (address.empty())
    if (auto env = std::getenv("LUMEN_ADDRESS"); env && *env)
      address = env;
  if (!address.empty()) {
    role.kind = detail::cluster_role::driver;
    role.head_address = detail::parse_address(address);
    role.token = detail::read_token(
      opts.token_file.empty() ? detail::default_token_file() : opts.token_file);
    detail::init_node(opts, std::move(role));
    return;
  }
  if (opts.local_nodes < 0 || opts.local_nodes > 64)
    throw usage_error("lumen::init: " + std::to_string(opts.local_nodes) +
                      " local nodes; give 0 to 64");
  if (opts.local_nodes == 0) {
    detail::init_node(opts, std::move(role));
    return;
  }
  // This process heads the local nodes, on loopback only; their coming
  // and going is how it runs, not news.
  detail::set_lifecycle_quiet(true);
  auto locals = std::make_unique<detail::local_nodes>();
  role.kind = detail::cluster_role::head;
  role.token = locals->token();
  detail::init_node(opts, std::move(role));
  try {
    std::string head;
    for (auto& n : nodes())
      if (n.id == this_node_id())
        head = n.address;
    locals->start(opts.local_nodes, head, [] {
      size_t alive = 0;
      for (auto& n : nodes())
        alive += n.alive && n.id != this_node_id();
      return alive;
    });
  } catch (...) {
    shutdown();
    throw;
  }
  std::lock_guard<std::mutex> guard{init_mtx};
  the_local_nodes = std::move(locals);
}

/// Throws `usage_error` if a runtime runs already or the registrations
/// clash; under init_mtx.
void require_startable() {
  if (the_runtime || the_sim)
    throw usage_error("lumen::init was called twice; call lumen::shutdown() "
                      "before initializing again");
  auto errs = detail::registration_errors();
  if (!errs.empty()) {
    std::string msg = "lumen::init: registration errors:";
    for (auto& e : errs)
      msg += "\n  " + e;
    throw usage_error(msg);
  }
}

/// The simulation `opts` or $LUMEN_SIMULATE=SEED ask for.
sim_options simulation_asked(const init_options& opts) {
  auto sim = opts.sim;
  if (auto env = std::getenv("LUMEN_SIMULATE"); !sim.enabled && env && *env) {
    try {
      size_t used = 0;
      sim.seed = std::stoull(env, &used);
      if (used != std::string{env}.size())
        throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw usage_error("LUMEN_SIMULATE is '" + std::string{env} +
                        "'; set it to the run's seed, a whole number");
    }
    sim.enabled = true;
  }
  return sim;
}

/// Starts a simulated cluster in this process as `sim` says.
void start_simulation(const init_options& opts, const sim_options& sim) {
  auto refuse = [](const std::string& what) {
    throw usage_error("lumen::init: " + what +
                      " cannot go with a simulated cluster (--simulate), "
                      "which is all in this process; drop one of the two");
  };
  if (!opts.address.empty())
    refuse("--address");
  if (opts.local_nodes > 0)
    refuse("--local-nodes");
  if (opts.tls.enabled || !opts.tls.cert_file.empty())
    refuse("--tls");
  std::lock_guard<std::mutex> guard{init_mtx};
  require_startable();
  // --trace: the run's timeline in virtual time.
  auto trace = opts.trace_file;
  if (auto env = std::getenv("LUMEN_TRACE"); trace.empty() && env && *env)
    trace = env;
  the_sim = std::make_unique<detail::sim_runtime>(sim, trace);
  detail::sim::set_live(&the_sim->world());
  detail::set_scheduling(&the_sim->world());
  live_sim = the_sim.get();
}

/// The trace `opts` or $LUMEN_TRACE ask for, recording; or null.
std::unique_ptr<detail::trace_session> start_trace(const init_options& opts) {
  auto file = opts.trace_file;
  if (file.empty())
    if (auto env = std::getenv("LUMEN_TRACE"); env && *env)
      file = env;
  if (file.empty())
    return nullptr;
  trace::name_thread("main"); // the script's thread, as a rule
  return std::make_unique<detail::trace_session>(file);
}

} // namespace

void init(const init_options& opts) {
  if (auto sim = simulation_asked(opts); sim.enabled) {
    start_simulation(opts, sim);
    return;
  }
  detail::reclaim_unmapped_blocks();
  detail::serve_if_local_node(opts); // a local node never returns from it
  auto trace = start_trace(opts);
  start_role(opts);
  if (!trace)
    return;
  try {
    trace->attach(detail::this_runtime().node_connections());
  } catch (...) {
    shutdown();
    throw;
  }
  std::lock_guard<std::mutex> guard{init_mtx};
  the_trace = std::move(trace);
}

void detail::init_node(const init_options& opts, detail::cluster_role role) {
  std::lock_guard<std::mutex> guard{init_mtx};
  require_startable();
  the_runtime = make_runtime(opts, std::move(role));
  live_runtime = the_runtime.get();
}

std::vector<node_info> nodes() {
  if (auto* sim = live_sim.load())
    return sim->nodes();
  return detail::this_runtime().nodes();
}

std::string this_node_id() {
  return detail::this_node();
}

void shutdown() {
  std::lock_guard<std::mutex> guard{init_mtx};
  if (the_trace) {
    // Before the nodes go: their parts are collected from them.
    auto id = detail::this_node();
    the_trace->finish(id == "local" || id == "head" ? "driver (" + id + ")"
                                                    : id);
    the_trace.reset();
  }
  // The local nodes first: their head going first would have them try to
  // rejoin it until they are stopped.
  the_local_nodes.reset();
  detail::set_lifecycle_quiet(false);
  live_runtime = nullptr;
  the_runtime.reset();
  if (the_sim) {
    if (!detail::sim::summaries_quiet())
      std::cerr << "lumen: " << the_sim->world().summary() << "\n";
    try {
      if (auto file = the_sim->world().write_timeline(); !file.empty())
        std::cerr << "lumen: wrote the timeline of the simulated run to "
                  << file
                  << " (open it at https://ui.perfetto.dev or "
                     "chrome://tracing)\n";
    } catch (const error& e) {
      std::cerr << "lumen: " << e.what() << "\n";
    }
    // Work left waiting unwinds with the run's scheduling still in force.
    live_sim = nullptr;
    the_sim.reset();
    detail::set_scheduling(nullptr);
    detail::sim::set_live(nullptr);
  }
}

bool is_initialized() {
  return live_runtime.load() != nullptr || live_sim.load() != nullptr;
}

namespace detail {

namespace {

// Set before a runtime starts its threads and kept after it stops, so that
// errors raised during shutdown can still name their node. Never destroyed:
// the runtime shuts down at exit, after this file's statics would be.
struct node_name {
  std::mutex mtx;
  std::string id = "local"; // under mtx
};

node_name& this_node_name() {
  static auto* name = new node_name;
  return *name;
}

} // namespace

void set_this_node(std::string id) {
  auto& name = this_node_name();
  std::lock_guard<std::mutex> guard{name.mtx};
  name.id = std::move(id);
}

std::string this_node() {
  if (auto* s = current_scheduling())
    return s->node();
  auto& name = this_node_name();
  std::lock_guard<std::mutex> guard{name.mtx};
  return name.id;
}

process_runtime& this_runtime() {
  auto* rt = live_runtime.load(std::memory_order_acquire);
  if (rt == nullptr && live_sim.load() != nullptr)
    throw usage_error(
      "this call needs a real cluster process and is not simulated: a "
      "simulated cluster (--simulate) runs remote functions, actors, get, "
      "wait, put, kill, the key-value store, collectives and typed CAF "
      "actors on its nodes; channels, node-shared memory and placement "
      "groups are not simulated yet. Run without --simulate to use them");
  if (rt == nullptr)
    throw usage_error("Lumen is not running; call lumen::init() first (or "
                      "it was shut down)");
  return *rt;
}

typed_host* running_typed_host() {
  if (auto* sim = live_sim.load(std::memory_order_acquire))
    return &sim->typed();
  return live_runtime.load(std::memory_order_acquire);
}

typed_host& this_typed_host() {
  if (auto* sim = live_sim.load(std::memory_order_acquire))
    return sim->typed();
  return this_runtime();
}

runtime& current_runtime() {
  if (auto* sim = live_sim.load(std::memory_order_acquire))
    return *sim;
  return this_runtime();
}

} // namespace detail

} // namespace lumen
