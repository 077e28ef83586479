#include "cluster/local_nodes.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "lumen/errors.hpp"
#include "lumen/util/files.hpp"
#include "lumen/util/huge_pages.hpp"

#include "core/log.hpp"
#include "core/node_setup.hpp"
#include "node/serving.hpp"
#include "security/token.hpp"
#include "transport/address.hpp"

extern char** environ;

namespace lumen::detail {

namespace {

constexpr const char* head_env = "LUMEN_LOCAL_NODE_OF";
constexpr const char* token_env = "LUMEN_LOCAL_TOKEN_FILE";
constexpr const char* parent_env = "LUMEN_LOCAL_PARENT";

/// This program's arguments, as it was started.
std::vector<std::string> own_arguments() {
  std::ifstream in{"/proc/self/cmdline", std::ios::binary};
  auto all = util::read_rest(in);
  std::vector<std::string> out;
  for (size_t at = 0; at < all.size();) {
    auto end = all.find('\0', at);
    if (end == std::string::npos)
      end = all.size();
    out.push_back(all.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status))
    return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string{"was killed by "} + strsignal(WTERMSIG(status));
  return "ended";
}

} // namespace

void serve_if_local_node(const init_options& opts) {
  auto head = std::getenv(head_env);
  if (head == nullptr || *head == '\0')
    return;
  // Ends with the head's process, however that ends; if it is gone
  // already, there is nothing to serve.
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  auto parent = std::getenv(parent_env);
  if (parent == nullptr || std::to_string(::getppid()) != parent)
    std::_Exit(0);
  mask_stop_signals();
  set_lifecycle_quiet(true);
  cluster_role role;
  role.kind = cluster_role::node;
  role.head_address = parse_address(head);
  role.token = read_token(std::getenv(token_env) ? std::getenv(token_env) : "");
  role.serve.exit_when_given_up = true;
  init_options node_opts;
  node_opts.num_cpus = opts.num_cpus;
  node_opts.tls = opts.tls;
  try {
    init_node(node_opts, role);
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "lumen: local node (pid %d) could not join its "
                 "head at %s: %s\n",
                 static_cast<int>(::getpid()), head, e.what());
    std::_Exit(1);
  }
  // With the program gone (the signal is PR_SET_PDEATHSIG's), nobody takes
  // what the tasks running here would return, and one that runs on (a
  // training loop meeting its peers) would hold the process, and its
  // cores, for as long as it runs.
  serve_until_stopped([parent = std::string{parent}] {
    return std::to_string(::getppid()) == parent
             ? std::string{}
             : "the program that started this local node (pid " + parent +
                 ") is gone";
  });
  std::_Exit(0);
}

local_nodes::local_nodes() {
  std::string tmpl = "/tmp/lumen-local-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw error(std::string{"cannot make a directory for the local nodes' "
                            "token in /tmp: "} +
                std::strerror(errno));
  dir_ = tmpl;
  token_ = load_or_create_token(dir_ + "/token");
}

void local_nodes::start(int n, const std::string& head_address,
                        const std::function<size_t()>& joined) {
  auto token_file = dir_ + "/token";
  auto args = own_arguments();
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> vars{std::string{head_env} + "=" + head_address,
                                std::string{token_env} + "=" + token_file,
                                std::string{parent_env} + "=" +
                                  std::to_string(::getpid())};
  // Nodes move the large blocks: on huge pages, whatever this process uses.
  auto huge = lumen::util::huge_pages_environment();
  if (!huge.empty())
    vars.push_back(huge);
  std::vector<char*> envp;
  for (auto& v : vars)
    envp.push_back(v.data());
  for (auto e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "LUMEN_LOCAL_", 12) != 0 &&
        (huge.empty() || std::strncmp(*e, "GLIBC_TUNABLES=", 15) != 0))
      envp.push_back(*e);
  envp.push_back(nullptr);
  // What main prints before lumen::init is the program's, not theirs.
  int quiet = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  for (int i = 0; i < n; ++i) {
    // Between fork and exec only async-signal-safe calls: the runtime's
    // threads run in this process.
    auto pid = ::fork();
    if (pid == 0) {
      if (quiet >= 0)
        ::dup2(quiet, STDOUT_FILENO);
      ::execve("/proc/self/exe", argv.data(), envp.data());
      ::_exit(127);
    }
    if (pid < 0) {
      ::close(quiet);
      stop();
      throw error(std::string{"cannot start a local node process: "} +
                  std::strerror(errno));
    }
    pids_.push_back(pid);
  }
  ::close(quiet);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (joined() < static_cast<size_t>(n)) {
    for (auto pid : pids_) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pids_.erase(std::find(pids_.begin(), pids_.end(), pid));
        stop();
        throw error("local node process " + std::to_string(pid) + " " +
                    describe_exit(status) +
                    " before it joined (its errors are above)");
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      stop();
      throw error("the local node processes did not all join within 30 s; "
                  "is the machine overloaded? Fewer --local-nodes may do");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

local_nodes::~local_nodes() {
  stop();
  ::unlink((dir_ + "/token").c_str());
  ::rmdir(dir_.c_str());
}

void local_nodes::stop() {
  for (auto pid : pids_)
    ::kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (auto pid : pids_) {
    int status = 0;
    // 0: still running; the pid or -1 (reaped already): gone.
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  pids_.clear();
}

} // namespace lumen::detail
