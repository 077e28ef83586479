#pragma once

// What every exercise's program shares (EXERCISES.md): its flags
// (--check, --step, --step=auto, --step=json), waiting for Enter between
// steps, the checker's cases and verdict, and a run's trace.

#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <lumen/init.hpp>
#include <lumen/sim.hpp>
#include <lumen/trace.hpp>

namespace exercise {

enum class step_mode { none, interactive, automatic, json };

struct flags {
  bool check = false;
  step_mode step = step_mode::none;
  std::vector<std::string> own; // flags of the exercise's own, as given
};

/// Reads the shared flags and those starting with one of `own_prefixes`
/// (e.g. "--plot="); for any other, prints what is wrong and returns
/// nothing (the program exits 2).
inline std::optional<flags>
parse_flags(int argc, char** argv,
            const std::vector<std::string>& own_prefixes = {}) {
  flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool own = false;
    for (auto& p : own_prefixes)
      own = own || a.rfind(p, 0) == 0;
    if (own)
      f.own.push_back(a);
    else if (a == "--check")
      f.check = true;
    else if (a == "--step")
      f.step = step_mode::interactive;
    else if (a == "--step=auto")
      f.step = step_mode::automatic;
    else if (a == "--step=json")
      f.step = step_mode::json;
    else {
      std::cerr << "unknown flag '" << a
                << "'; use --check, --step, --step=auto or --step=json";
      for (auto& p : own_prefixes)
        std::cerr << ", " << p << "...";
      std::cerr << "\n";
      return std::nullopt;
    }
  }
  return f;
}

/// `[a, b, c]`: a state's numbers as --step prints them, and as JSON.
template <class T>
std::string list(const std::vector<T>& v) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < v.size(); ++i)
    out << (i ? ", " : "") << v[i];
  out << "]";
  return out.str();
}

/// Under --step: waits for Enter before the next `what`. The step is
/// flushed in every mode, so that a run stopped at a deadline, or one that
/// crashed, still shows the step it reached.
inline void wait_for_enter(step_mode mode, const char* what) {
  std::cout.flush();
  if (mode != step_mode::interactive)
    return;
  std::cout << "  (Enter for the next " << what << ")" << std::flush;
  std::string line;
  std::getline(std::cin, line);
}

/// Under --step, in a simulated run from now on: each event as it happens
/// (a message delivered, a method started or finished, a result ready),
/// with what `state` says of the run then ("server version 3"; as JSON,
/// `"version": 3`), waiting for Enter between them under --step.
inline void step_events(
  step_mode mode,
  std::function<std::string(const lumen::sim::event&, bool json)> state) {
  if (mode == step_mode::none)
    return;
  lumen::sim::on_event([mode, state](const lumen::sim::event& e) {
    if (e.kind == "send")
      return; // its delivery shows it
    auto now = state(e, mode == step_mode::json);
    if (mode == step_mode::json) {
      auto line = lumen::sim::to_json(e);
      line.pop_back(); // the closing brace: the state goes in too
      std::cout << line << (now.empty() ? "" : ", ") << now << "}\n";
      return;
    }
    std::printf("%9.3f ms  %-7s %-8s %-44s %s\n",
                static_cast<double>(e.time.count()) / 1e6, e.node.c_str(),
                e.kind.c_str(),
                (e.what + (e.peer.empty() ? "" : " from " + e.peer)).c_str(),
                now.c_str());
    wait_for_enter(mode, "event");
  });
}

/// step_events beside how many calls of a method whose name ends in
/// `method` (e.g. "::apply_gradients") finished so far: "(server version
/// 3)", or `"version": 3` in JSON.
inline void step_counting(step_mode mode, const std::string& method) {
  auto count = std::make_shared<int>(0);
  step_events(mode, [count, method](const lumen::sim::event& e, bool json) {
    auto& w = e.what;
    if (e.kind == "finish" && w.size() >= method.size() &&
        w.compare(w.size() - method.size(), method.size(), method) == 0)
      ++*count;
    return json ? "\"version\": " + std::to_string(*count)
                : "(server version " + std::to_string(*count) + ")";
  });
}

/// The links of gigabit_cluster: a small switch's.
constexpr double link_latency = 50e-6, link_bytes_per_second = 125e6;

/// A simulated cluster of `nodes` nodes (node-0 for the driver) under
/// `seed`, its links of 50 µs at 1 Gbit/s.
inline lumen::init_options gigabit_cluster(uint64_t seed, int nodes) {
  lumen::init_options opts;
  opts.sim.enabled = true;
  opts.sim.seed = seed;
  opts.sim.nodes = nodes;
  opts.sim.latency = std::chrono::duration_cast<std::chrono::nanoseconds>(
    std::chrono::duration<double>(link_latency));
  opts.sim.bandwidth = link_bytes_per_second;
  return opts;
}

/// Runs `body` (which returns "" or what is wrong) in a simulated run set
/// up by `opts`, then ends the run; an error the run throws (a deadlock, a
/// dead actor, a method that threw) is what is wrong too. "" or "seed S:
/// what".
template <class Body>
std::string in_simulation(const lumen::init_options& opts, Body body) {
  lumen::init(opts);
  std::string what;
  try {
    what = body();
  } catch (const std::exception& e) {
    what = e.what();
  }
  lumen::shutdown();
  return what.empty() ? ""
                      : "seed " + std::to_string(opts.sim.seed) + ": " + what;
}

/// A run the runtime watches, so that `lumen exercises run ID --trace FILE`
/// (which sets $LUMEN_TRACE) gets its timeline: the runtime starts here,
/// unless the exercise started it, and writes the file at the end.
class traced_run {
public:
  traced_run()
    : mine_(!lumen::is_initialized()) {
    if (mine_)
      lumen::init();
  }

  ~traced_run() {
    if (mine_)
      lumen::shutdown();
  }

  traced_run(const traced_run&) = delete;
  traced_run& operator=(const traced_run&) = delete;

private:
  bool mine_;
};

/// A checker's cases: each printed as it is decided, then the last line,
/// PASS (exit 0) or FAIL with the first thing to fix (exit 1).
class checker {
public:
  /// Case `name` passed if `what` is empty; else `what` says what to fix.
  void report(const std::string& name, const std::string& what) {
    // Flushed: a run stopped at its deadline or by a crash still shows
    // the cases it decided.
    std::cout << "case " << name << ": " << (what.empty() ? "ok" : "FAIL ")
              << what << std::endl;
    if (!what.empty())
      fails_.push_back(what);
  }

  bool passing() const {
    return fails_.empty();
  }

  int verdict() const {
    if (fails_.empty()) {
      std::cout << "PASS\n";
      return 0;
    }
    std::cout << "FAIL: " << fails_.front() << "\n";
    return 1;
  }

private:
  std::vector<std::string> fails_;
};

/// Reports `check(seed)` ("" or what is wrong) as the case "`what`, seed
/// S" for each seed a part on the simulated cluster is checked under.
template <class Check>
void under_each_seed(checker& cases, const std::string& what, Check check) {
  for (uint64_t seed : {1, 2, 3})
    cases.report(what + ", seed " + std::to_string(seed), check(seed));
}

} // namespace exercise
