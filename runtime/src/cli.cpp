#include "lumen/cli.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lumen/cluster.hpp"
#include "lumen/errors.hpp"

#include "log.hpp"
#include "node_setup.hpp"
#include "token.hpp"

namespace lumen {

namespace {

constexpr int exit_ok = 0;
constexpr int exit_failed = 1;
constexpr int exit_usage = 2;

const char* usage_text
  = "usage: lumen <command> [flags]\n"
    "\n"
    "commands:\n"
    "  start --head [--host H] [--port P]     start a head node\n"
    "  start --address HOST:PORT              start a node that joins a head\n"
    "  status [--address HOST:PORT]           list the cluster's nodes\n"
    "  stop                                   stop the nodes started here\n"
    "\n"
    "`lumen <command> --help` describes each command's flags.\n";

const char* start_help
  = "usage: lumen start (--head | --address HOST:PORT) [flags]\n"
    "\n"
    "  --head                 start the head: the cluster's directory\n"
    "  --address HOST:PORT    join the head listening there\n"
    "  --host H               address to listen on (default 127.0.0.1)\n"
    "  --port P               port to listen on (head default 6380, node: "
    "any)\n"
    "  --token-file F         cluster token (default $LUMEN_TOKEN_FILE, else\n"
    "                         ~/.lumen/cluster-token; the head creates it, "
    "mode 0600)\n"
    "  --resources k=v,...    resources to advertise (default cpu=<cores>)\n"
    "  --num-cpus N           threads that run tasks (default: one per core)\n"
    "  --code-path LIB.so     load remote functions and actors from a shared\n"
    "                         library (repeatable)\n"
    "  --block                stay in the foreground until SIGINT/SIGTERM\n"
    "  --log-file F           where a background node logs (default\n"
    "                         ~/.lumen/logs/<node>-<port>.log)\n";

const char* status_help
  = "usage: lumen status [--address HOST:PORT] [--token-file F]\n"
    "\n"
    "Prints the cluster's nodes: id, address, alive or dead, the actors\n"
    "each hosts for other processes, and resources.\n"
    "The address defaults to $LUMEN_ADDRESS, else 127.0.0.1:6380.\n";

const char* stop_help
  = "usage: lumen stop\n"
    "\n"
    "Stops the heads and nodes that `lumen start` started in the background\n"
    "on this machine for this user (SIGTERM, then SIGKILL after 10 s).\n";

struct usage_failure {
  std::string text;
};

std::string lumen_dir() {
  auto home = std::getenv("HOME");
  return std::string{home && *home ? home : "/tmp"} + "/.lumen";
}

std::string run_dir() {
  return lumen_dir() + "/run";
}

void make_dirs() {
  ::mkdir(lumen_dir().c_str(), 0700);
  ::mkdir(run_dir().c_str(), 0700);
  ::mkdir((lumen_dir() + "/logs").c_str(), 0700);
}

/// Flags as `--name value` or `--name=value`; booleans take no value.
class flag_reader {
public:
  flag_reader(int argc, char** argv, std::vector<std::string> booleans)
    : booleans_(std::move(booleans)) {
    for (int i = 0; i < argc; ++i)
      args_.emplace_back(argv[i]);
  }

  /// Next flag and its value; false at the end.
  bool next(std::string& flag, std::string& value) {
    if (pos_ >= args_.size())
      return false;
    auto arg = args_[pos_++];
    if (arg.rfind("--", 0) != 0)
      throw usage_failure{"unexpected argument '" + arg + "'"};
    auto eq = arg.find('=');
    flag = arg.substr(0, eq);
    value.clear();
    bool boolean = false;
    for (auto& b : booleans_)
      boolean = boolean || b == flag;
    if (boolean) {
      if (eq != std::string::npos)
        throw usage_failure{flag + " takes no value"};
      return true;
    }
    if (eq != std::string::npos)
      value = arg.substr(eq + 1);
    else if (pos_ < args_.size())
      value = args_[pos_++];
    else
      throw usage_failure{flag + " needs a value"};
    return true;
  }

private:
  std::vector<std::string> args_;
  std::vector<std::string> booleans_;
  size_t pos_ = 0;
};

int parse_int(const std::string& flag, const std::string& value, int lo,
              int hi) {
  try {
    size_t used = 0;
    int n = std::stoi(value, &used);
    if (used == value.size() && n >= lo && n <= hi)
      return n;
  } catch (const std::exception&) {
  }
  throw usage_failure{flag + " needs a whole number from " + std::to_string(lo)
                      + " to " + std::to_string(hi) + ", got '" + value + "'"};
}

std::map<std::string, double> parse_resources(const std::string& text) {
  std::map<std::string, double> out;
  std::stringstream in{text};
  for (std::string item; std::getline(in, item, ',');) {
    auto eq = item.find('=');
    try {
      if (eq == std::string::npos || eq == 0)
        throw std::invalid_argument("");
      size_t used = 0;
      auto v = std::stod(item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1 || v < 0)
        throw std::invalid_argument("");
      out[item.substr(0, eq)] = v;
    } catch (const std::exception&) {
      throw usage_failure{"--resources takes name=amount pairs separated by "
                          "commas, e.g. cpu=2,gpu=1; got '"
                          + item + "'"};
    }
  }
  return out;
}

struct start_options {
  bool head = false;
  bool block = false;
  std::string address;
  init_options init;
  detail::node_settings serve;
  std::string token_file;
  std::string log_file;
  std::vector<std::string> code_paths;
};

start_options parse_start(int argc, char** argv) {
  start_options o;
  bool port_given = false;
  flag_reader flags{argc, argv, {"--head", "--block", "--help"}};
  std::string flag, value;
  while (flags.next(flag, value)) {
    if (flag == "--help")
      throw usage_failure{""};
    else if (flag == "--head")
      o.head = true;
    else if (flag == "--block")
      o.block = true;
    else if (flag == "--address")
      o.address = value;
    else if (flag == "--host")
      o.serve.host = value;
    else if (flag == "--port") {
      o.serve.port = static_cast<uint16_t>(parse_int(flag, value, 0, 65535));
      port_given = true;
    } else if (flag == "--token-file")
      o.token_file = value;
    else if (flag == "--resources")
      o.serve.resources = parse_resources(value);
    else if (flag == "--num-cpus")
      o.init.num_cpus = parse_int(flag, value, 1, 4096);
    else if (flag == "--code-path")
      o.code_paths.push_back(value);
    else if (flag == "--log-file")
      o.log_file = value;
    else
      throw usage_failure{"unknown flag '" + flag + "'"};
  }
  if (o.head == !o.address.empty())
    throw usage_failure{"give exactly one of --head and --address"};
  if (!o.address.empty())
    detail::parse_address(o.address);
  if (o.head && !port_given)
    o.serve.port = 6380;
  if (o.serve.resources.empty())
    o.serve.resources["cpu"] = o.init.num_cpus > 0
                                 ? o.init.num_cpus
                                 : std::thread::hardware_concurrency();
  if (o.token_file.empty())
    o.token_file = detail::default_token_file();
  return o;
}

/// Starts the node in this process; returns "ID ADDRESS" once it serves.
std::string start_node(const start_options& o) {
  for (auto& path : o.code_paths)
    if (::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr)
      throw usage_error("cannot load --code-path " + path + ": "
                        + ::dlerror());
  detail::cluster_role role;
  role.serve = o.serve;
  if (o.head) {
    role.kind = detail::cluster_role::head;
    role.token = detail::load_or_create_token(o.token_file);
  } else {
    role.kind = detail::cluster_role::node;
    role.head_address = detail::parse_address(o.address);
    role.token = detail::read_token(o.token_file);
  }
  init_node(o.init, role);
  for (auto& n : nodes())
    if (n.id == this_node_id())
      return n.id + " " + n.address;
  throw error("the head does not list this node");
}

/// Blocks until SIGINT or SIGTERM, which the caller masked beforehand.
void wait_for_stop_signal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
}

void mask_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void print_started(const start_options& o, const std::string& id,
                   const std::string& address, pid_t pid,
                   const std::string& log) {
  std::cout << "Started " << id << " at " << address << " (pid " << pid
            << ")";
  if (!log.empty())
    std::cout << ", logging to " << log;
  std::cout << "\n";
  if (o.head)
    std::cout << "Token file: " << o.token_file << "\n"
              << "Join with:  lumen start --address " << address
              << " --token-file " << o.token_file << "\n"
              << "Scripts:    lumen::init with --address=" << address
              << " (or LUMEN_ADDRESS=" << address << ")\n";
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

/// When the process started (clock ticks since boot), to tell it from a
/// later process that got the same pid; "" if unknown.
std::string start_time(pid_t pid) {
  auto f = proc_stat(pid);
  return f.size() > 19 ? f[19] : std::string{};
}

/// Running, not a zombie waiting for a parent that may never reap it.
bool process_alive(pid_t pid) {
  auto f = proc_stat(pid);
  if (f.empty())
    return ::kill(pid, 0) == 0 && !std::ifstream{"/proc/self/stat"};
  return f[0] != "Z";
}

int run_start(int argc, char** argv) {
  auto o = parse_start(argc, argv);
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
    wait_for_stop_signal();
    detail::log_line("stopping " + this_node_id());
    shutdown();
    return exit_ok;
  }
  // In the background: the child starts the node and reports through a pipe
  // whether it came up, so that this command's exit code tells the truth.
  make_dirs();
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
    ::setsid();
    auto log = o.log_file.empty()
                 ? lumen_dir() + "/logs/" + (o.head ? "head" : "node") + "-"
                     + std::to_string(::getpid()) + ".log"
                 : o.log_file;
    std::string report;
    int code = exit_ok;
    if (!std::freopen(log.c_str(), "a", stderr)
        || !std::freopen("/dev/null", "w", stdout)) {
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
      std::ofstream{run_dir() + "/" + std::to_string(::getpid()) + ".pid"}
        << this_node_id() << " " << start_time(::getpid()) << "\n";
      detail::log_line("started " + report.substr(2));
    } else {
      detail::log_line("failed to start: " + report.substr(2));
    }
    report += "\n";
    auto written = ::write(fds[1], report.data(), report.size());
    static_cast<void>(written);
    ::close(fds[1]);
    if (code != exit_ok)
      ::_exit(code);
    wait_for_stop_signal();
    detail::log_line("stopping " + this_node_id());
    shutdown();
    ::unlink((run_dir() + "/" + std::to_string(::getpid()) + ".pid").c_str());
    ::_exit(exit_ok);
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
    auto what = report.size() > 2 ? report.substr(2) : "it exited at once";
    std::cerr << "lumen start: " << what;
    return report.rfind("U ", 0) == 0 ? exit_usage : exit_failed;
  }
  std::istringstream in{report.substr(2)};
  std::string id, address, log;
  in >> id >> address >> log;
  print_started(o, id, address, pid, log);
  return exit_ok;
}

int run_status(int argc, char** argv) {
  std::string address, token_file;
  flag_reader flags{argc, argv, {"--help"}};
  std::string flag, value;
  while (flags.next(flag, value)) {
    if (flag == "--help")
      throw usage_failure{""};
    else if (flag == "--address")
      address = value;
    else if (flag == "--token-file")
      token_file = value;
    else
      throw usage_failure{"unknown flag '" + flag + "'"};
  }
  if (address.empty()) {
    auto env = std::getenv("LUMEN_ADDRESS");
    address = env && *env ? env : "127.0.0.1:6380";
  }
  detail::cluster_role role;
  role.kind = detail::cluster_role::driver;
  role.hello_role = "client";
  role.head_address = detail::parse_address(address);
  role.token = detail::read_token(
    token_file.empty() ? detail::default_token_file() : token_file);
  init_options opts;
  opts.num_cpus = 1;
  init_node(opts, role);
  auto all = nodes();
  shutdown();
  std::cout << std::left << std::setw(10) << "NODE" << std::setw(24)
            << "ADDRESS" << std::setw(8) << "STATE" << std::setw(8)
            << "ACTORS"
            << "RESOURCES\n";
  for (auto& n : all) {
    std::string res;
    for (auto& [k, v] : n.resources) {
      std::ostringstream x;
      x << k << "=" << v;
      res += (res.empty() ? "" : ",") + x.str();
    }
    std::cout << std::setw(10) << n.id << std::setw(24) << n.address
              << std::setw(8) << (n.alive ? "alive" : "dead") << std::setw(8)
              << n.actors << res << "\n";
  }
  return exit_ok;
}

int run_stop(int argc, char** argv) {
  flag_reader flags{argc, argv, {"--help"}};
  std::string flag, value;
  while (flags.next(flag, value)) {
    if (flag == "--help")
      throw usage_failure{""};
    throw usage_failure{"unknown flag '" + flag + "'"};
  }
  std::vector<pid_t> pids;
  if (auto dir = ::opendir(run_dir().c_str())) {
    while (auto entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name.size() > 4 && name.substr(name.size() - 4) == ".pid")
        pids.push_back(static_cast<pid_t>(std::atoi(name.c_str())));
    }
    ::closedir(dir);
  }
  int stopped = 0;
  for (auto pid : pids) {
    auto file = run_dir() + "/" + std::to_string(pid) + ".pid";
    std::string id, started;
    std::ifstream{file} >> id >> started;
    // A pid that now belongs to another process is not ours to stop.
    if (pid <= 0 || !process_alive(pid) || started != start_time(pid)) {
      ::unlink(file.c_str());
      continue;
    }
    ::kill(pid, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (process_alive(pid) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (process_alive(pid))
      ::kill(pid, SIGKILL);
    ::unlink(file.c_str());
    ++stopped;
  }
  std::cout << "Stopped " << stopped << " node" << (stopped == 1 ? "" : "s")
            << "\n";
  return exit_ok;
}

} // namespace

int cli_main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << usage_text;
    return exit_usage;
  }
  std::string verb = argv[1];
  const char* help = verb == "start"    ? start_help
                     : verb == "status" ? status_help
                     : verb == "stop"   ? stop_help
                                        : nullptr;
  if (verb == "--help" || verb == "help") {
    std::cout << usage_text;
    return exit_ok;
  }
  if (help == nullptr) {
    std::cerr << "lumen: unknown command '" << verb << "'\n\n" << usage_text;
    return exit_usage;
  }
  try {
    if (verb == "start")
      return run_start(argc - 2, argv + 2);
    if (verb == "status")
      return run_status(argc - 2, argv + 2);
    return run_stop(argc - 2, argv + 2);
  } catch (const usage_failure& f) {
    if (f.text.empty()) {
      std::cout << help;
      return exit_ok;
    }
    std::cerr << "lumen " << verb << ": " << f.text << "\n\n" << help;
    return exit_usage;
  } catch (const usage_error& e) {
    std::cerr << "lumen " << verb << ": " << e.what() << "\n";
    return exit_usage;
  } catch (const std::exception& e) {
    std::cerr << "lumen " << verb << ": " << e.what() << "\n";
    return exit_failed;
  }
}

} // namespace lumen
