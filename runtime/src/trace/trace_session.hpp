#pragma once

// A trace across processes. The driver records from lumen::init and asks
// every node it reaches to record too (a trace request on the data plane),
// measuring the offset of the node's clock to its own as it does; at
// shutdown it collects each node's part, moved onto its clock, and writes
// the one file.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/data_client.hpp"
#include "transport/data_plane.hpp"

namespace lumen::detail {

/// A node's end of one connection's trace requests: it records while its
/// asker traces, and stops when the asker collects or goes.
class trace_server {
public:
  trace_server() = default;
  ~trace_server();

  trace_server(const trace_server&) = delete;
  trace_server& operator=(const trace_server&) = delete;

  /// Answers request `id`; a malformed one gets a failed reply.
  void serve(const std::shared_ptr<data_connection>& c, uint64_t id,
             const bytes& request);

private:
  bool recording_ = false;
};

/// The driver's end.
class trace_session {
public:
  /// Starts recording in this process; throws `usage_error` if `file`
  /// cannot be written, before anything runs.
  explicit trace_session(std::string file);
  ~trace_session();

  trace_session(const trace_session&) = delete;
  trace_session& operator=(const trace_session&) = delete;

  using node_link = std::pair<std::string, std::shared_ptr<data_client>>;

  /// Has each node record too; one that does not answer is left out, and
  /// said so at `finish`.
  void attach(const std::vector<node_link>& nodes);

  /// Collects the nodes' parts, writes the file with this process's part
  /// (named `process_name`) and says on stderr where it is, or what failed.
  void finish(const std::string& process_name);

private:
  struct peer {
    std::string node;
    std::shared_ptr<data_client> link;
    int64_t offset_us; // add to the node's clock to get ours
    uint32_t pid;
  };

  std::string file_;
  std::vector<peer> peers_;
  std::vector<std::string> missing_; // "node-2 (why)"
};

} // namespace lumen::detail
