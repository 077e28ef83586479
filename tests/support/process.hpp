#pragma once

// Child processes for the cluster tests: each test keeps the PIDs it starts
// and ends exactly those (never pkill).

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace lumen::test {

class process {
public:
  /// Starts `argv` with stdout and stderr going to one pipe.
  explicit process(std::vector<std::string> argv,
                   std::vector<std::string> env = {}) {
    int fds[2];
    if (::pipe(fds) != 0)
      throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0)
      throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      // A process group of its own, whose parent outside it is this test:
      // never orphaned while the test runs. In the group ctest shares with
      // every test, a child stopped with SIGSTOP got the kernel's SIGHUP
      // (POSIX's orphaned process groups) whenever another test's process
      // exited, and died as if killed.
      ::setpgid(0, 0);
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      ::close(fds[1]);
      for (auto& e : env)
        ::putenv(e.data());
      std::vector<char*> args;
      for (auto& a : argv)
        args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
    ::fcntl(out_, F_SETFL, O_NONBLOCK);
  }

  process(const process&) = delete;
  process& operator=(const process&) = delete;

  ~process() {
    if (running())
      kill(SIGKILL);
    ::close(out_);
  }

  pid_t pid() const {
    return pid_;
  }

  /// Waits until the output contains `text`; returns the output so far, or
  /// nothing at the deadline or if the process ended first.
  std::optional<std::string> await_output(const std::string& text,
                                          std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      read_available();
      if (output_.find(text) != std::string::npos)
        return output_;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) > 0 &&
          (p.revents & (POLLHUP | POLLERR)) && !(p.revents & POLLIN))
        return output_.find(text) != std::string::npos
                 ? std::optional<std::string>{output_}
                 : std::nullopt;
    }
  }

  const std::string& output() {
    read_available();
    return output_;
  }

  /// Sends `sig` and waits for the exit; returns the exit status.
  int kill(int sig) {
    ::kill(pid_, sig);
    return wait();
  }

  /// Sends `sig` and returns at once (SIGSTOP, SIGCONT).
  void signal(int sig) {
    ::kill(pid_, sig);
  }

  /// Waits for the process to end; returns its exit code (128+signal if a
  /// signal ended it).
  int wait() {
    if (status_)
      return *status_;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    read_available();
    return *status_;
  }

  bool running() {
    if (status_)
      return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      status_ =
        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return false;
    }
    return true;
  }

private:
  void read_available() {
    char buf[4096];
    for (ssize_t n; (n = ::read(out_, buf, sizeof(buf))) > 0;)
      output_.append(buf, static_cast<size_t>(n));
  }

  pid_t pid_ = -1;
  int out_ = -1;
  std::string output_;
  std::optional<int> status_;
};

/// What `lumen start` printed: "Started ID at ADDRESS (pid PID)".
struct started {
  std::string id;
  std::string address;
  pid_t pid = -1;
};

/// Finds the "Started" line in `output`; nothing if there is none.
inline std::optional<started> parse_started(const std::string& output) {
  auto at = output.find("Started ");
  if (at == std::string::npos)
    return std::nullopt;
  std::istringstream line{output.substr(at, output.find('\n', at) - at)};
  started s;
  std::string word, at_word, pid_word;
  line >> word >> s.id >> at_word >> s.address >> pid_word >> s.pid;
  if (at_word != "at" || pid_word != "(pid" || s.pid <= 0)
    return std::nullopt;
  return s;
}

/// The row of node `id` in `lumen status` output, as words: id, address,
/// data port, state, actors, resources. Empty if the node is not listed.
inline std::vector<std::string> status_row(const std::string& output,
                                           const std::string& id) {
  std::istringstream lines{output};
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words{line};
    std::vector<std::string> row;
    for (std::string w; words >> w;)
      row.push_back(w);
    if (!row.empty() && row[0] == id)
      return row;
  }
  return {};
}

/// The STATE column of node `id` in `lumen status` output, or "".
inline std::string status_of(const std::string& output, const std::string& id) {
  auto row = status_row(output, id);
  return row.size() > 3 ? row[3] : std::string{};
}

/// A new folder /tmp/lumen-<what>-XXXXXX for a test's files.
inline std::string fresh_dir(const std::string& what) {
  auto tmpl = "/tmp/lumen-" + what + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error("cannot make a folder like " + tmpl);
  return tmpl;
}

/// Runs a command to completion; returns its exit code and output.
inline std::pair<int, std::string> run(std::vector<std::string> argv,
                                       std::vector<std::string> env = {}) {
  process p{std::move(argv), std::move(env)};
  // Reads until the output closes, so that a chatty child never blocks on
  // a full pipe.
  p.await_output(std::string(1, '\0'), std::chrono::minutes(2));
  auto code = p.wait();
  return {code, p.output()};
}

} // namespace lumen::test
