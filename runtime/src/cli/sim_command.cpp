// `lumen sim SCRIPT --seeds=A..B [-- ARGS]`: runs a script once per seed
// in a simulated cluster, each run a process of its own
// (`SCRIPT --simulate=SEED ARGS`), one a core at once, and names the seeds
// whose run failed, in seed order: any one of them fails the same way again
// alone.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
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
  // Other jobs' children must not hold this run's log open.
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    throw error("cannot write " + out);
  // Made before fork: between fork and exec, with other jobs' threads
  // holding locks, the child only writes.
  auto cannot = "cannot run " + argv[0] + "\n";
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw error("cannot start " + argv[0]);
  }
  if (pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(args[0], args.data());
    [[maybe_unused]] auto n = ::write(2, cannot.data(), cannot.size());
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
  uint64_t runs = o.last - o.first + 1;
  if (runs == 0)
    throw usage_error("--seeds: the whole range of 64-bit seeds is more runs "
                      "than anyone can wait for; give a smaller range");
  unsigned jobs = o.jobs > 0 ? o.jobs : std::thread::hardware_concurrency();
  jobs = static_cast<unsigned>(
    std::clamp<uint64_t>(jobs, 1, std::min<uint64_t>(runs, 1024)));
  // Runs that ended while one started earlier still runs, kept until the
  // runs before them are reported: the report reads the same whatever the
  // order the runs end in.
  std::map<uint64_t, run_end> ended;
  std::atomic<uint64_t> next{0};
  std::mutex report;
  uint64_t reported = 0, failed = 0;
  std::exception_ptr broke;
  auto run_seeds = [&](unsigned job) {
    auto out = dir + "/run" + std::to_string(job) + ".log";
    try {
      for (uint64_t i; (i = next++) < runs;) {
        std::vector<std::string> argv{o.script, "--simulate=" +
                                                  std::to_string(o.first + i)};
        argv.insert(argv.end(), o.args.begin(), o.args.end());
        auto end =
          run_once(argv, out, std::chrono::duration<double>(o.timeout));
        std::lock_guard<std::mutex> lock{report};
        ended.emplace(i, std::move(end));
        for (auto at = ended.begin();
             at != ended.end() && at->first == reported;
             at = ended.erase(at), ++reported) {
          auto& e = at->second;
          if (e.code == 0)
            continue;
          ++failed;
          std::cout << "seed " << o.first + reported << ": "
                    << (e.code > 0 ? "exit " + std::to_string(e.code)
                                   : "signal " + std::to_string(-e.code))
                    << "\n"
                    << e.tail << std::flush;
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock{report};
      if (!broke)
        broke = std::current_exception();
      next = runs; // the other jobs start nothing more
    }
    std::remove(out.c_str());
  };
  std::vector<std::thread> others;
  for (unsigned j = 1; j < jobs; ++j)
    others.emplace_back(run_seeds, j);
  run_seeds(0);
  for (auto& t : others)
    t.join();
  ::rmdir(dir.c_str());
  if (broke)
    std::rethrow_exception(broke);
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
