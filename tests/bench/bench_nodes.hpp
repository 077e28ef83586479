#pragma once

// Cluster nodes for the benchmarks: this very program started again with
// --serve runs `lumen::cli_main` (the way a user's program serves as a
// node), and the benchmark joins them as a driver.

#include <unistd.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "process.hpp"

namespace lumen::bench {

inline std::string self_exe() {
  char buf[4096];
  auto n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    throw std::runtime_error("cannot find this program's path");
  return std::string(buf, static_cast<size_t>(n));
}

struct node_process {
  std::unique_ptr<lumen::test::process> proc;
  std::string address;
};

/// This program as `--serve start --block --num-cpus 1 args...`, with
/// `env` added to its environment, once it serves. Its main must hand
/// `--serve` to lumen::cli_main.
inline node_process serve(const std::vector<std::string>& args,
                          std::vector<std::string> env = {}) {
  std::vector<std::string> argv{self_exe(), "--serve",    "start",
                                "--block",  "--num-cpus", "1"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto p = std::make_unique<lumen::test::process>(argv, std::move(env));
  auto out = p->await_output("(pid", std::chrono::seconds(30));
  auto s = out ? lumen::test::parse_started(*out) : std::nullopt;
  if (!s)
    throw std::runtime_error("a node did not start: " + p->output());
  return {std::move(p), s->address};
}

} // namespace lumen::bench
