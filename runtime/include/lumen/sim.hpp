#pragma once

// The simulated cluster. A script started with `--simulate[=SEED]` (or
// LUMEN_SIMULATE=SEED) runs unchanged on `--sim-nodes` simulated nodes in
// its own process: one piece of its code at a time, chosen by a scheduler
// seeded from SEED; time is virtual and moves only from event to event; a
// message of S bytes between two nodes arrives after the link's latency
// plus S over its bandwidth. The same seed gives the same run, event for
// event, and `--sim-log=FILE` writes each event as a line of JSON, the same
// file byte for byte (FoundationDB's simulation, MIT 6.824's labrpc).
//
//   lumen::init(argc, argv);              // ./script --simulate=7
//   auto r = square.remote(4);            // runs on a simulated node
//   lumen::get(r);                        // the driver steps the run
//   lumen::sim::now();                    // the virtual time it took
//
// Outside a simulated run the calls here throw `usage_error`, except
// `active()`. lumen::sleep_for and lumen::now (lumen/time.hpp) go by the
// virtual clock in a simulated run, by the real one elsewhere.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "lumen/init.hpp"
#include "lumen/time.hpp"

namespace lumen::sim {

/// One thing that happened in a simulated run; a line of `--sim-log`.
struct event {
  /// Its place in the run, from 1.
  uint64_t seq = 0;
  /// Virtual time since the run began.
  std::chrono::nanoseconds time{0};
  /// "send" (a message leaves `node` for `peer`), "deliver" (it arrives
  /// at `node` from `peer`), "lost" (it arrived at a node that died
  /// meanwhile), "start" and "finish" (work on `node`), "ready" (a result
  /// reached the caller at `node`), "kill" and "restart" (of `node`;
  /// `what` is "partition" for a node the cluster fenced because a
  /// partition cut it off), "partition" and "heal" (the links of `node`, on
  /// the side a partition named, cut and whole again), "slow" (`node`'s
  /// compute now takes `what` times as long).
  std::string kind;
  std::string node;
  std::string peer;
  /// The work: a function's or "Class::method"'s name, "spawn Class".
  std::string what;
  /// The message's size (send, deliver).
  uint64_t bytes = 0;
  /// The task's or call's number in this run, from 1.
  uint64_t work = 0;
};

/// The event as the line `--sim-log` writes (no newline).
std::string to_json(const event& e);

/// True while this process runs a simulated cluster.
bool active() noexcept;

/// The seed of the run.
uint64_t seed();

/// Virtual time since the run began.
std::chrono::nanoseconds now();

/// The compute the calling task or method does, as virtual time on its
/// node: `d` times the node's slowness (`--sim-slow`; 1 by default).
/// Code costs no virtual time unless it says so here.
void charge(std::chrono::duration<double> d);

/// Runs the next event; false if nothing is left to happen. From the
/// script's own thread only (the driver), not from inside a task.
bool step();

/// Runs events until `done()` holds; throws `error` if the run has
/// nothing left to do first.
void run_until(const std::function<bool()>& done);

/// Calls `observer` with every event from now on (one observer; an empty
/// function removes it). It runs inside the simulation: it must not call
/// into Lumen.
void on_event(std::function<void(const event&)> observer);

/// How long after a node's death the cluster knows of it: the failure
/// detector's time (a real cluster's is within 2 s).
inline constexpr std::chrono::seconds death_noticed_after{1};

/// Kills node `id` at virtual time `at` (now, if that is past), as SIGKILL
/// would: its work stops where it is, its actors die, and messages to it
/// are lost. `death_noticed_after` later the cluster knows: its tasks fail
/// with `actor_died` (a spread task with retries left runs again on
/// another node), calls that reached its actors fail, and an actor with
/// restarts left is built again on another node. Throws `usage_error` for
/// a node that does not exist, or node-0, where the script itself runs.
void kill_node(const std::string& id, std::chrono::nanoseconds at);

/// Brings node `id` back at `at`, empty, to take new work.
void restart_node(const std::string& id, std::chrono::nanoseconds at);

/// Cuts every link between the nodes of `side` and the other nodes at
/// `at`, for `lasting`. A message across the cut waits until it heals, as
/// TCP retransmits it. A cut that lasts `death_noticed_after` or longer is
/// death to the side without node-0 (where the head is): the cluster
/// fences its nodes as if killed (their work and the calls that reached
/// them fail, their actors restart elsewhere), and they come back empty
/// when the cut heals. Throws `usage_error` for an unknown node, or a
/// side that is empty or every node.
void partition(const std::vector<std::string>& side,
               std::chrono::nanoseconds at, std::chrono::nanoseconds lasting);

/// Makes node `id`'s compute `factor` times as slow as `--sim-slow` set it
/// from `at`, for `lasting` (zero: for the rest of the run).
void slow_node(const std::string& id, double factor,
               std::chrono::nanoseconds at,
               std::chrono::nanoseconds lasting = std::chrono::nanoseconds{0});

/*
 * For protocols of their own on the simulated network, as the collectives'
 * simulated transport is: a message between nodes that is not a task or a
 * call, and a wait that lets the rest of the run go on.
 */

/// Sends a message of `bytes` (their count: the data stays where the
/// caller keeps it) from the calling code's node to node `to`, in the log
/// as `label`; `arrived` runs inside the simulation once it is there, after
/// the link's latency plus `bytes` over its bandwidth, in order with all
/// else on the link. It never runs if `to` dies first, or the sender before
/// the message left. `arrived` must not wait or call into Lumen. Throws
/// `usage_error` for a node that does not exist.
void send_to(const std::string& to, uint64_t bytes, const std::string& label,
             std::function<void()> arrived);

/// Waits until `ready()` holds, checked after every event of the run, or
/// until `timeout` of virtual time passed; returns ready(). A task or
/// method yields to the rest of the run meanwhile; the script runs the run
/// (and throws `error` if nothing is left to happen first).
bool wait_for(const std::function<bool()>& ready,
              std::chrono::nanoseconds timeout);

/// Whether the cluster knows node `id` is down: from death_noticed_after
/// after its death (at once for a node fenced by a partition) until it
/// restarts. Throws `usage_error` for a node that does not exist.
bool known_down(const std::string& id);

/// Runs `body` beside the calling code, as a thread of its would: on
/// work of its own on the same node, as the same actor (running_actor),
/// from now on; the caller goes on meanwhile. `body` may wait as work
/// does; what escapes it is thrown where the script runs the run.
void run_beside(std::function<void()> body);

/// The simulated run's number in this process, from 1: what a protocol
/// keeps beside a run tells from it that it is another run's.
uint64_t run_number();

/// Whose code runs, as a protocol tells its members apart where they all
/// share one thread: a Lumen actor's id (lumen::current_actor_id), a
/// typed CAF actor's "typed-" and its CAF id while its handler runs, ""
/// for a task or the script.
std::string running_actor();

/*
 * Faults as flags: `--sim-fault=KEY=VALUE,...` (repeatable), or a JSON file
 * of them, `--sim-faults=FILE`, an array of objects with the same keys:
 *
 *   at=2s,kill=node-1                 kill_node
 *   at=5s,restart=node-1              restart_node
 *   at=1s,partition=node-1+node-2,for=3s
 *                                     partition (JSON: ["node-1","node-2"])
 *   at=0s,slow=node-2,factor=3,for=10s
 *                                     slow_node (`for` may be left out)
 *
 * Or drawn from the seed: `--sim-chaos=kill=R,partition=R,slow=R` (any of
 * the three), R faults of that kind a virtual second over the cluster, at
 * times drawn from the seed, each on a node drawn from node-1 up: a killed
 * node restarts 0.5-3 s later, a partition cuts one node off for 0.1-3 s,
 * a slowdown makes one node 2-5 times as slow for 1-5 s. Chaos never keeps
 * a run going: once the script has nothing else to wait for, it ends.
 */

/// What a sweep found.
struct sweep_result {
  /// Runs made, one a seed.
  size_t runs = 0;
  /// The seeds whose run threw, with what it said, in seed order.
  std::vector<std::pair<uint64_t, std::string>> failed;
};

/// Runs `script` in a fresh simulated cluster once per seed from `first`
/// to `last`, each set up as `opts` says (simulation on, its seed
/// replaced); a seed fails when `script` throws. A failing seed runs the
/// same way again alone: `opts.sim.seed = seed`, or `--simulate=SEED`.
/// Throws `usage_error` if Lumen is running already.
sweep_result sweep(uint64_t first, uint64_t last,
                   const std::function<void()>& script, init_options opts = {});

} // namespace lumen::sim
