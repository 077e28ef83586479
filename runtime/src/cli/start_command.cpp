// `lumen start`: a head or a node, in the foreground (--block) or in the
// background, where a child process runs it and reports through a pipe
// whether it came up, so that the command's exit code tells the truth.

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "lumen/cluster.hpp"
#include "lumen/detail/registry.hpp"
#include "lumen/errors.hpp"

#include "cli/commands.hpp"
#include "cli/run_files.hpp"
#include "core/log.hpp"
#include "core/node_setup.hpp"
#include "core/process_runtime.hpp"
#include "node/serving.hpp"
#include "security/credentials.hpp"
#include "security/token.hpp"

// Defined beside the registry (core/registry.cpp), once in each copy of the
// runtime.
extern "C" const char lumen_registry_marker;

namespace lumen::detail {

namespace {

/// Loads the --code-path libraries; warns about one that registers nothing,
/// which is most likely built without LUMEN_REMOTE / LUMEN_ACTOR. Refuses
/// one with a runtime of its own (it linked lumen::runtime): its calls bind
/// to this process's runtime only while the dynamic linker lets ours win,
/// and built with hidden symbols it keeps its registrations to itself.
void load_code(const std::vector<std::string>& paths) {
  for (auto& path : paths) {
    auto before = registered_count() + config_steps().size();
    // dlopen looks for a name without a slash ("libjob.so") on the library
    // path; the flag names a file, relative to where `lumen start` runs.
    auto file = std::filesystem::absolute(path).string();
    auto* library = ::dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (library == nullptr)
      throw usage_error("cannot load --code-path " + path + ": " + ::dlerror());
    // Found in the library itself, not through it in this process: a copy.
    auto* marker = ::dlsym(library, "lumen_registry_marker");
    if (marker != nullptr && marker != &lumen_registry_marker)
      throw usage_error("--code-path " + path +
                        " carries a copy of the Lumen runtime (it links "
                        "lumen::runtime); the lumen command brings the "
                        "runtime: link the library with lumen::code_path "
                        "instead (runtime/doc/clusters.md)");
    if (registered_count() + config_steps().size() == before)
      log_line("warning: --code-path " + path +
               " registers no remote function, actor class or typed "
               "actor (no LUMEN_REMOTE, LUMEN_ACTOR or LUMEN_TYPED_ACTOR "
               "in it, or a copy of the runtime linked in with hidden "
               "symbols took them?)");
  }
}

/// Starts the node in this process; returns "ID ADDRESS" once it serves.
std::string start_node(const start_options& o) {
  load_code(o.code_paths);
  cluster_role role;
  role.serve = o.serve;
  if (o.head) {
    role.kind = cluster_role::head;
    role.token = load_or_create_token(o.init.token_file);
  } else {
    role.kind = cluster_role::node;
    role.head_address = parse_address(o.init.address);
    role.token = read_token(o.init.token_file);
  }
  init_node(o.init, role);
  for (auto& n : nodes())
    if (n.id == this_node_id())
      return n.id + " " + n.address;
  throw error("the head does not list this node");
}

void print_started(const start_options& o, const std::string& id,
                   const std::string& address, pid_t pid,
                   const std::string& log) {
  std::cout << "Started " << id << " at " << address << " (pid " << pid << ")";
  if (!log.empty())
    std::cout << ", logging to " << log;
  std::cout << "\n";
  if (!o.head)
    return;
  // Every process of the cluster needs the same TLS flags to get in.
  std::string tls;
  if (auto t = resolve_tls(o.init.tls); !t.cert_file.empty())
    tls = " --tls-cert " + t.cert_file + " --tls-key " + t.key_file +
          " --tls-ca " + t.ca_file;
  else if (t.enabled)
    tls = " --tls";
  std::cout << "Token file: " << o.init.token_file << "\n"
            << "Join with:  lumen start --address " << address
            << " --token-file " << o.init.token_file << tls << "\n"
            << "Scripts:    lumen::init with --address=" << address << tls
            << " (or LUMEN_ADDRESS=" << address << ")\n";
}

/// The child's side of a background start: starts the node, reports
/// "S ID ADDRESS LOG", "U why" (misuse) or "F why" on `report_fd`, serves.
[[noreturn]] void run_in_background(const start_options& o, int report_fd) {
  ::setsid();
  auto log =
    o.log_file.empty() ? default_log_file(o.head, ::getpid()) : o.log_file;
  std::string report;
  int code = exit_ok;
  if (!std::freopen(log.c_str(), "a", stderr) ||
      !std::freopen("/dev/null", "w", stdout)) {
    report = "F cannot open the log file " + log;
    code = exit_failed;
  } else {
    try {
      report = "S " + start_node(o) + " " + log;
    } catch (const usage_error& e) {
      report = std::string{"U "} + e.what();
      code = exit_usage;
    } catch (const std::exception& e) {
      report = std::string{"F "} + e.what();
      code = exit_failed;
    }
  }
  if (code == exit_ok) {
    record_this_node(this_node_id());
    log_line("started " + report.substr(2));
  } else {
    log_line("failed to start: " + report.substr(2));
  }
  report += "\n";
  auto written = ::write(report_fd, report.data(), report.size());
  static_cast<void>(written);
  ::close(report_fd);
  if (code != exit_ok)
    ::_exit(code);
  serve_until_stopped();
  forget_this_node();
  ::_exit(exit_ok);
}

} // namespace

int run_start(const start_options& o) {
  mask_stop_signals();
  if (o.block) {
    std::string started;
    try {
      started = start_node(o);
    } catch (const usage_error& e) {
      std::cerr << "lumen start: " << e.what() << "\n";
      return exit_usage;
    } catch (const std::exception& e) {
      std::cerr << "lumen start: " << e.what() << "\n";
      return exit_failed;
    }
    auto space = started.find(' ');
    print_started(o, started.substr(0, space), started.substr(space + 1),
                  ::getpid(), "");
    std::cout.flush();
    serve_until_stopped();
    return exit_ok;
  }
  make_lumen_dirs();
  int fds[2];
  if (::pipe(fds) != 0) {
    std::cerr << "lumen start: cannot create a pipe: " << std::strerror(errno)
              << "\n";
    return exit_failed;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    std::cerr << "lumen start: cannot fork: " << std::strerror(errno) << "\n";
    return exit_failed;
  }
  if (pid == 0) {
    ::close(fds[0]);
    run_in_background(o, fds[1]);
  }
  ::close(fds[1]);
  std::string report;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;)
    report.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  if (report.size() < 2 || report[0] != 'S') {
    int status = 0;
    ::waitpid(pid, &status, 0);
    auto what = report.size() > 2 ? report.substr(2) : "it exited at once\n";
    std::cerr << "lumen start: " << what;
    return report.rfind("U ", 0) == 0 ? exit_usage : exit_failed;
  }
  std::istringstream in{report.substr(2)};
  std::string id, address, log;
  in >> id >> address >> log;
  print_started(o, id, address, pid, log);
  return exit_ok;
}

} // namespace lumen::detail
