#include "cli/run_files.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace lumen::detail {

namespace {

std::string run_dir() {
  return lumen_dir() + "/run";
}

std::string record_of(pid_t pid) {
  return run_dir() + "/" + std::to_string(pid) + ".pid";
}

/// The fields of /proc/PID/stat after the command name; empty if gone.
std::vector<std::string> proc_stat(pid_t pid) {
  std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
  std::string line;
  std::vector<std::string> fields;
  if (!std::getline(stat, line))
    return fields;
  auto paren = line.rfind(')');
  if (paren == std::string::npos)
    return fields;
  std::istringstream rest{line.substr(paren + 1)};
  for (std::string f; rest >> f;)
    fields.push_back(f);
  return fields; // [0] is the state, [19] the start time
}

/// When the process started (clock ticks since boot); "" if unknown.
std::string start_time(pid_t pid) {
  auto f = proc_stat(pid);
  return f.size() > 19 ? f[19] : std::string{};
}

} // namespace

std::string lumen_dir() {
  auto home = std::getenv("HOME");
  return std::string{home && *home ? home : "/tmp"} + "/.lumen";
}

void make_lumen_dirs() {
  ::mkdir(lumen_dir().c_str(), 0700);
  ::mkdir(run_dir().c_str(), 0700);
  ::mkdir((lumen_dir() + "/logs").c_str(), 0700);
}

std::string default_log_file(bool head, pid_t pid) {
  return lumen_dir() + "/logs/" + (head ? "head" : "node") + "-" +
         std::to_string(pid) + ".log";
}

void record_this_node(const std::string& id) {
  auto pid = ::getpid();
  std::ofstream{record_of(pid)} << id << " " << start_time(pid) << "\n";
}

void forget_this_node() {
  forget_node(::getpid());
}

void forget_node(pid_t pid) {
  ::unlink(record_of(pid).c_str());
}

std::vector<recorded_node> running_nodes() {
  std::vector<pid_t> pids;
  if (auto dir = ::opendir(run_dir().c_str())) {
    while (auto entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name.size() > 4 && name.substr(name.size() - 4) == ".pid")
        pids.push_back(static_cast<pid_t>(std::atoi(name.c_str())));
    }
    ::closedir(dir);
  }
  std::vector<recorded_node> out;
  for (auto pid : pids) {
    std::string id, started;
    std::ifstream{record_of(pid)} >> id >> started;
    // A pid that now belongs to another process is not ours.
    if (pid <= 0 || !process_alive(pid) || started != start_time(pid))
      forget_node(pid);
    else
      out.push_back({pid, id});
  }
  return out;
}

bool process_alive(pid_t pid) {
  auto f = proc_stat(pid);
  if (f.empty())
    return ::kill(pid, 0) == 0 && !std::ifstream{"/proc/self/stat"};
  return f[0] != "Z";
}

} // namespace lumen::detail
