// `lumen sim SCRIPT --seeds=A..B [-- ARGS]`: runs a script once per seed
// in a simulated cluster, each run a process of its own
// (`SCRIPT --simulate=SEED ARGS`), and names the seeds whose run failed:
// any one of them fails the same way again alone.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "lumen/errors.hpp"

#include "cli/commands.hpp"

namespace lumen::detail {

namespace {

/// How one run ended: its exit code (or -signal), and its output's last
/// lines.
struct run_end {
  int code = 0;
  std::string tail;
};

std::string last_lines(const std::string& file, size_t keep) {
  std::ifstream in{file};
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > keep)
      lines.erase(lines.begin());
  }
  std::string out;
  for (auto& l : lines)
    out += "    " + l + "\n";
  return out;
}

/// Runs `argv` with its output in `out`, killed after `timeout`.
run_end run_once(const std::vector<std::string>& argv, const std::string& out,
                 std::chrono::duration<double> timeout) {
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    throw error("cannot write " + out);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw error("cannot start " + argv[0]);
  }
  if (pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(args[0], args.data());
    std::perror(args[0]);
    ::_exit(127);
  }
  ::close(fd);
  // The child's end is an event on its pidfd; no pidfd (a kernel before
  // 5.3), no timeout.
  bool killed = false;
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd ended{pidfd, POLLIN, 0};
    auto ms = static_cast<int>(timeout.count() * 1000);
    if (::poll(&ended, 1, ms) == 0) {
      ::kill(pid, SIGKILL); // our own child, and only it
      killed = true;
    }
    ::close(pidfd);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  run_end end;
  end.code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  end.tail = last_lines(out, 4);
  if (killed)
    end.tail += "    (killed after " + std::to_string(timeout.count()) +
                " s of wall time)\n";
  return end;
}

} // namespace

int run_sim(const sim_command_options& o) {
  if (::access(o.script.c_str(), X_OK) != 0)
    throw usage_error("cannot run " + o.script +
                      ": give the path of a built Lumen program");
  char dir_template[] = "/tmp/lumen-sim-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr)
    throw error("cannot make a folder for the runs' output under /tmp");
  std::string dir = dir_template;
  auto out = dir + "/run.log";
  size_t failed = 0, runs = 0;
  for (auto seed = o.first;; ++seed) {
    std::vector<std::string> argv{o.script,
                                  "--simulate=" + std::to_string(seed)};
    argv.insert(argv.end(), o.args.begin(), o.args.end());
    auto end = run_once(argv, out, std::chrono::duration<double>(o.timeout));
    ++runs;
    if (end.code != 0) {
      ++failed;
      std::cout << "seed " << seed << ": "
                << (end.code > 0 ? "exit " + std::to_string(end.code)
                                 : "signal " + std::to_string(-end.code))
                << "\n"
                << end.tail;
    }
    if (seed == o.last)
      break;
  }
  std::remove(out.c_str());
  ::rmdir(dir.c_str());
  std::ostringstream args;
  for (auto& a : o.args)
    args << " " << a;
  std::cout << runs << " seeds (" << o.first << ".." << o.last << "): "
            << (failed == 0
                  ? "none failed"
                  : std::to_string(failed) + " failed; run one alone with " +
                      o.script + " --simulate=SEED" + args.str())
            << "\n";
  return failed == 0 ? exit_ok : exit_failed;
}

} // namespace lumen::detail
