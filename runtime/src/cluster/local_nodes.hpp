#pragma once

// The embedded cluster's node processes (init_options::local_nodes): this
// program run again with the same arguments and an environment variable
// naming the head, so that its lumen::init makes it a node of that head
// and serves until the head's process stops it or ends. They know the
// same remote functions and actors as the program that started them,
// since they are that program.

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "lumen/init.hpp"

namespace lumen::detail {

/// In a local node (its environment says so): serves as one until
/// stopped, then exits the process. Elsewhere it returns at once.
void serve_if_local_node(const init_options& opts);

class local_nodes {
public:
  /// A private directory holding a fresh token for the cluster to come.
  /// Throws `error` if it cannot be made.
  local_nodes();

  const std::string& token() const noexcept {
    return token_;
  }

  /// Starts `n` processes that join the head at `head_address`; returns
  /// once `joined()` counts them all. Throws `error` naming a process that
  /// ended first, or that did not join within 30 s.
  void start(int n, const std::string& head_address,
             const std::function<size_t()>& joined);

  /// Stops them (SIGTERM, then SIGKILL after 5 s), waits for them, and
  /// removes the directory.
  ~local_nodes();

  local_nodes(const local_nodes&) = delete;
  local_nodes& operator=(const local_nodes&) = delete;

private:
  void stop();

  std::string dir_;
  std::string token_;
  std::vector<pid_t> pids_;
};

} // namespace lumen::detail
