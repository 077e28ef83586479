#pragma once

// The verbs of the `lumen` command, each given its parsed flags; cli.cpp
// parses them. Each returns the exit code: 0 done, 1 failed, 2 misuse.

#include <cstdint>
#include <string>
#include <vector>

#include "lumen/init.hpp"

#include "node/node_manager.hpp"

namespace lumen::detail {

constexpr int exit_ok = 0;
constexpr int exit_failed = 1;
constexpr int exit_usage = 2;

struct start_options {
  bool head = false;
  bool block = false;
  init_options init;    // --num-cpus, --address (the head's), --token-file
  node_settings serve;  // --host, --port, --resources, --when-given-up
  std::string log_file; // empty: default_log_file
  std::vector<std::string> code_paths;
};

struct status_options {
  std::string address; // empty: $LUMEN_ADDRESS, else 127.0.0.1:6380
  std::string token_file;
  tls_options tls;
};

int run_start(const start_options& o);
int run_status(const status_options& o);
struct stop_options {
  double grace_seconds = 10; // from SIGTERM to SIGKILL
};

int run_stop(const stop_options& o);

struct sim_command_options {
  std::string script;
  uint64_t first = 1; // --seeds=FIRST..LAST
  uint64_t last = 100;
  double timeout = 60;           // wall seconds a run may take
  unsigned jobs = 0;             // runs at once (0: one a core)
  std::vector<std::string> args; // after --, to every run
};

int run_sim(const sim_command_options& o);

} // namespace lumen::detail
