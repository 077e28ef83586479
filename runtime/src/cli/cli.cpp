#include "lumen/cli.hpp"
#include "lumen/util/huge_pages.hpp"

#include <iostream>

#include "lumen/errors.hpp"
#include "lumen/util/huge_pages.hpp"

#include "cli/commands.hpp"
#include "cli/flags.hpp"
#include "security/token.hpp"

namespace lumen {

namespace {

using namespace detail;

/// The flags of `lumen start`, and what they leave to be settled after
/// parsing.
struct start_flags {
  start_options o;
  int port = -1; // -1: the default for the role
  std::string when_given_up = "rejoin";

  void add_to(CLI::App& start) {
    auto head = start.add_flag("--head", o.head,
                               "start the head: the cluster's directory");
    add_init_flags(start, o.init);
    head->excludes("--address");
    start.add_option("--host", o.serve.host, "address to listen on")
      ->type_name("H")
      ->check(non_empty())
      ->capture_default_str();
    start
      .add_option("--port", port,
                  "port to listen on (head: 6380, node: any free one; 0: "
                  "any free one)")
      ->type_name("P")
      ->check(CLI::Range(0, 65535));
    start
      .add_option("--code-path", o.code_paths,
                  "load remote functions and actors from a shared library "
                  "(repeatable)")
      ->type_name("LIB.so")
      ->check(CLI::ExistingFile);
    start.add_flag("--block", o.block,
                   "stay in the foreground until SIGINT or SIGTERM");
    start
      .add_option("--log-file", o.log_file,
                  "where a background node logs (default "
                  "~/.lumen/logs/head-PID.log or node-PID.log)")
      ->type_name("F")
      ->check(non_empty());
    start
      .add_option("--when-given-up", when_given_up,
                  "when the head gave this node up for dead (it was paused "
                  "or cut off): rejoin under a new id, or exit")
      ->check(CLI::IsMember({"rejoin", "exit"}))
      ->capture_default_str();
  }

  /// Settles defaults and the rules CLI11 does not check.
  void finish() {
    if (o.head != o.init.address.empty())
      throw CLI::ValidationError("start",
                                 "give exactly one of --head and --address "
                                 "HOST:PORT");
    o.serve.port = static_cast<uint16_t>(port >= 0 ? port : o.head ? 6380 : 0);
    o.serve.exit_when_given_up = when_given_up == "exit";
    if (o.init.token_file.empty())
      o.init.token_file = default_token_file();
  }
};

/// `--seeds`'s FIRST..LAST into `o`.
void parse_seeds(const std::string& text, sim_command_options& o) {
  auto dots = text.find("..");
  try {
    if (dots == std::string::npos || text[0] == '-' ||
        text.find('-', dots) != std::string::npos)
      throw std::invalid_argument("");
    size_t used = 0;
    o.first = std::stoull(text.substr(0, dots), &used);
    if (used != dots)
      throw std::invalid_argument("");
    auto rest = text.substr(dots + 2);
    o.last = std::stoull(rest, &used);
    if (used != rest.size() || o.last < o.first)
      throw std::invalid_argument("");
  } catch (const std::exception&) {
    throw CLI::ValidationError("--seeds",
                               "takes FIRST..LAST, whole numbers with FIRST "
                               "<= LAST, e.g. 1..1000; got '" +
                                 text + "'");
  }
}

} // namespace

int cli_main(int argc, char** argv, const std::vector<cli_verb>& verbs) {
  // Heads, nodes and trainers move the large blocks.
  util::use_huge_pages();
  for (auto& v : verbs)
    if (argc > 1 && v.name == argv[1])
      return v.run(argc - 1, argv + 1);
  CLI::App app{"Start, inspect and stop the heads and nodes of a Lumen "
               "cluster.",
               "lumen"};
  app.require_subcommand(1);
  app.footer("`lumen <command> --help` describes each command's flags. "
             "Exit codes: 0 done, 1 failed, 2 bad usage.");
  start_flags start;
  start.add_to(*app.add_subcommand(
    "start", "start a head (--head), or a node that joins one (--address)"));
  status_options status;
  auto status_cmd = app.add_subcommand(
    "status", "list the cluster's nodes: id, control and data address, "
              "alive or dead, actors hosted for others, resources");
  status_cmd
    ->add_option("--address", status.address,
                 "the head (default: $LUMEN_ADDRESS, else 127.0.0.1:6380)")
    ->type_name("HOST:PORT")
    ->check(non_empty());
  status_cmd
    ->add_option("--token-file", status.token_file,
                 "the cluster token (default: $LUMEN_TOKEN_FILE, else "
                 "~/.lumen/cluster-token)")
    ->type_name("F")
    ->check(non_empty());
  add_tls_flags(*status_cmd, status.tls);
  stop_options stop;
  auto* stop_cmd = app.add_subcommand(
    "stop", "stop every head and node this user started in the background "
            "on this machine with `lumen start` (recorded in ~/.lumen/run), "
            "and wait until they have exited: SIGTERM, then SIGKILL for any "
            "still running after --grace");
  stop_cmd
    ->add_option("--grace", stop.grace_seconds,
                 "seconds from SIGTERM to SIGKILL (default 10; a node gives "
                 "its running work up to 10 s to finish)")
    ->type_name("SECONDS")
    ->check(CLI::Range(0.0, 3600.0));
  sim_command_options sim;
  std::string seeds = "1..100";
  auto* sim_cmd = app.add_subcommand(
    "sim", "run a program in a simulated cluster once per seed, each run a "
           "process of its own (PROGRAM --simulate=SEED ARGS), and name the "
           "seeds whose run failed");
  sim_cmd->add_option("program", sim.script, "the Lumen program to run")
    ->required()
    ->check(CLI::ExistingFile);
  sim_cmd
    ->add_option("--seeds", seeds, "the seeds, FIRST..LAST (default 1..100)")
    ->type_name("A..B");
  sim_cmd
    ->add_option("--timeout", sim.timeout,
                 "wall seconds a run may take before it is killed and "
                 "counted failed (default 60)")
    ->type_name("SECONDS")
    ->check(CLI::Range(0.001, 86400.0));
  sim_cmd
    ->add_option("--jobs", sim.jobs,
                 "runs at once (default: one a core); failures are reported "
                 "in seed order all the same")
    ->type_name("N")
    ->check(CLI::Range(1u, 1024u));
  sim_cmd->add_option("args", sim.args,
                      "after --: arguments every run gets (e.g. "
                      "--sim-nodes=4)");
  // Listed for --help; never parsed here, as each parses its own flags.
  for (auto& v : verbs)
    app.add_subcommand(v.name, v.summary);
  try {
    app.parse(argc, argv);
    if (app.got_subcommand("start"))
      start.finish();
    if (app.got_subcommand("sim"))
      parse_seeds(seeds, sim);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return exit_ok;
  } catch (const CLI::ParseError& e) {
    if (app.get_subcommands().empty()) {
      if (argc > 1 && argv[1][0] != '-')
        std::cerr << "lumen: unknown command '" << argv[1] << "'\n\n";
      std::cerr << app.help();
      return exit_usage;
    }
    auto verb = app.get_subcommands().front()->get_name();
    std::cerr << "lumen " << verb << ": " << e.what() << "\n"
              << "Run `lumen " << verb << " --help` for the flags.\n";
    return exit_usage;
  }
  auto verb = app.get_subcommands().front()->get_name();
  try {
    if (verb == "start")
      return run_start(start.o);
    if (verb == "status")
      return run_status(status);
    if (verb == "sim")
      return run_sim(sim);
    return run_stop(stop);
  } catch (const usage_error& e) {
    std::cerr << "lumen " << verb << ": " << e.what() << "\n";
    return exit_usage;
  } catch (const std::exception& e) {
    std::cerr << "lumen " << verb << ": " << e.what() << "\n";
    return exit_failed;
  }
}

std::optional<int> parse_verb(const std::string& verb,
                              const std::function<void()>& parse,
                              const std::function<std::string()>& help,
                              const std::string& next) {
  try {
    parse();
  } catch (const CLI::CallForHelp&) {
    std::cout << help();
    return exit_ok;
  } catch (const CLI::ParseError& e) {
    std::cerr << "lumen " << verb << ": " << e.what() << "\n" << next << "\n";
    return exit_usage;
  }
  return std::nullopt;
}

} // namespace lumen
