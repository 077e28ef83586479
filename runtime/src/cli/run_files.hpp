#pragma once

// What `lumen start` leaves on this machine for `lumen stop`: one file per
// background head or node, ~/.lumen/run/PID.pid, holding its node id and
// its process's start time (so that a later process that got the same pid
// is never taken for it), and its log under ~/.lumen/logs.

#include <sys/types.h>

#include <string>
#include <vector>

namespace lumen::detail {

/// ~/.lumen (HOME unset: /tmp/.lumen).
std::string lumen_dir();

/// Creates ~/.lumen, its run/ and logs/ folders (mode 0700).
void make_lumen_dirs();

/// Where a background head or node logs unless --log-file says otherwise:
/// ~/.lumen/logs/head-PID.log or node-PID.log.
std::string default_log_file(bool head, pid_t pid);

/// Records this process as the background node `id`.
void record_this_node(const std::string& id);

/// Forgets this process's record.
void forget_this_node();

struct recorded_node {
  pid_t pid;
  std::string id;
};

/// The recorded nodes still running as the processes recorded; records of
/// the others are removed.
std::vector<recorded_node> running_nodes();

/// Running, not a zombie waiting for a parent that may never reap it.
bool process_alive(pid_t pid);

/// Forgets the record of `pid`.
void forget_node(pid_t pid);

} // namespace lumen::detail
