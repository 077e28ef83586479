#pragma once

// Hosts in network namespaces a test makes itself: a switch namespace
// with a bridge, and hosts a, b, c... (three unless told) each wired to it
// by a veth pair, with addresses of their own (10.201.0.1, .2, ...,
// reachable only inside these namespaces). A host's link is cut at the
// switch, or shaped to a rate in both directions (tc's token bucket), as
// machines on one switch. Making them needs root and iproute2;
// `can_make_namespaces` says why not, for a test to skip.

#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "process.hpp"

namespace lumen::test {

/// The exit code ctest takes for "skipped" (SKIP_RETURN_CODE 77).
inline constexpr int skipped = 77;

/// Runs a shell command; throws with its output if it fails.
inline void sh(const std::string& cmd) {
  auto [code, out] = run({"/bin/sh", "-c", cmd + " 2>&1"});
  if (code != 0)
    throw std::runtime_error("`" + cmd + "` failed: " + out);
}

/// The `ip` command's path: /usr/sbin on Debian 12, /sbin on older ones.
inline std::string ip_command() {
  return ::access("/usr/sbin/ip", X_OK) == 0 ? "/usr/sbin/ip" : "/sbin/ip";
}

/// True if this process may make network namespaces; otherwise false,
/// with the reason in `why`.
inline bool can_make_namespaces(std::string& why) {
  if (::geteuid() != 0) {
    why = "it needs root";
    return false;
  }
  if (run({"/bin/sh", "-c", "command -v ip"}).first != 0) {
    why = "it needs iproute2 (apt-get install iproute2)";
    return false;
  }
  auto probe = "lmprobe" + std::to_string(::getpid());
  auto [code, out] =
    run({"/bin/sh", "-c",
         "ip netns add " + probe + " 2>&1 && ip netns del " + probe + " 2>&1"});
  if (code != 0) {
    why = "this machine does not allow network namespaces (" + out + ")";
    return false;
  }
  return true;
}

/// The namespaces and links of one run; torn down in the destructor.
struct topology {
  std::string tag = std::to_string(::getpid());
  std::string sw = "lm" + tag + "s";
  std::vector<std::string> hosts;

  explicit topology(size_t count = 3) {
    for (size_t i = 0; i < count; ++i)
      hosts.push_back("lm" + tag + static_cast<char>('a' + i));
    sh("ip netns add " + sw);
    sh("ip -n " + sw + " link add br0 type bridge");
    sh("ip -n " + sw + " link set br0 up");
    for (size_t i = 0; i < hosts.size(); ++i) {
      auto& h = hosts[i];
      sh("ip netns add " + h);
      sh("ip -n " + sw + " link add " + port(i) + " type veth peer name eth0" +
         " netns " + h);
      sh("ip -n " + sw + " link set " + port(i) + " master br0");
      sh("ip -n " + sw + " link set " + port(i) + " up");
      sh("ip -n " + h + " addr add " + address(i) + "/24 dev eth0");
      sh("ip -n " + h + " link set eth0 up");
      sh("ip -n " + h + " link set lo up");
    }
  }

  topology(const topology&) = delete;
  topology& operator=(const topology&) = delete;

  ~topology() {
    for (auto& h : hosts)
      run({"/bin/sh", "-c", "ip netns del " + h});
    run({"/bin/sh", "-c", "ip netns del " + sw});
  }

  static std::string address(size_t i) {
    return "10.201.0." + std::to_string(i + 1);
  }

  /// The shell command that cuts host `i`'s link at the switch.
  std::string cut(size_t i) const {
    return "ip -n " + sw + " link set " + port(i) + " down";
  }

  /// The shell command that lists host `i`'s established TCP connections,
  /// a line each ending in the local and the peer's IP:PORT.
  std::string tcp_connections(size_t i) const {
    return "ip netns exec " + hosts[i] + " ss -Htn state established";
  }

  /// Host `i`'s link limited to `rate` (tc's form: "1gbit") each way:
  /// what leaves the host at its end, what reaches it at the switch's.
  void shape(size_t i, const std::string& rate) const {
    auto tbf = " root tbf rate " + rate + " burst 256kb latency 100ms";
    sh("ip netns exec " + hosts[i] + " tc qdisc replace dev eth0" + tbf);
    sh("ip netns exec " + sw + " tc qdisc replace dev " + port(i) + tbf);
  }

  /// `argv` run inside host `i`.
  std::vector<std::string> in(size_t i, std::vector<std::string> argv) const {
    std::vector<std::string> out{ip_command(), "netns", "exec", hosts[i]};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

private:
  std::string port(size_t i) const {
    return "p" + tag + static_cast<char>('a' + i);
  }
};

/// Starts `program start --block ARGS` on host `i` with HOME=`home`
/// (`program`: the lumen command, or a program that hands these to
/// lumen::cli_main); returns the process once it printed its address,
/// which goes to `address`. Throws with its output if it did not start
/// within 30 s.
inline std::unique_ptr<process>
start_program_node(const topology& net, size_t i,
                   std::vector<std::string> program,
                   const std::vector<std::string>& args,
                   const std::string& home, std::string& address) {
  program.insert(program.end(), {"start", "--block"});
  program.insert(program.end(), args.begin(), args.end());
  auto p = std::make_unique<process>(net.in(i, program),
                                     std::vector<std::string>{"HOME=" + home});
  auto out = p->await_output("(pid", std::chrono::seconds(30));
  auto s = out ? parse_started(*out) : std::nullopt;
  if (!s)
    throw std::runtime_error("a node did not start on host " + net.hosts[i] +
                             ": " + p->output());
  address = s->address;
  return p;
}

#ifdef LUMEN_CLI
/// start_program_node of the lumen command.
inline std::unique_ptr<process> start_node(const topology& net, size_t i,
                                           std::vector<std::string> args,
                                           const std::string& home,
                                           std::string& address) {
  return start_program_node(net, i, {LUMEN_CLI}, args, home, address);
}
#endif

} // namespace lumen::test
