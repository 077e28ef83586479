#include "cli/flags.hpp"

#include <cmath>
#include <sstream>

#include "lumen/detail/init_flags.hpp"
#include "lumen/errors.hpp"

#include "sim/sim_fault_plan.hpp"
#include "sim/sim_world.hpp"
#include "transport/address.hpp"

namespace lumen::detail {

namespace {

CLI::Validator address_check() {
  return CLI::Validator(
    [](std::string& text) -> std::string {
      try {
        parse_address(text);
        return {};
      } catch (const usage_error& e) {
        return e.what();
      }
    },
    "", "address");
}

std::map<std::string, double> parse_resources(const std::string& text);
void add_sim_flags(CLI::App& app, sim_options& sim);

/// The app `init(argc, argv)` parses with; `help` is set by --help.
void build_init_app(CLI::App& app, init_options& opts, bool& help) {
  app.set_help_flag();
  app.add_flag("--help", help, "print this help and exit");
  add_init_flags(app, opts);
  app
    .add_option("--local-nodes", opts.local_nodes,
                "without --address: node processes to start on this "
                "machine, each this program again")
    ->type_name("N")
    ->check(CLI::Range(0, 64));
  app
    .add_option("--trace", opts.trace_file,
                "write a timeline of the run there at shutdown, as Chrome "
                "trace-event JSON for Perfetto (default: $LUMEN_TRACE)")
    ->type_name("F")
    ->check(non_empty());
  add_sim_flags(app, opts.sim);
  app.allow_extras(); // positional arguments belong to the program
}

/// The flags of a simulated cluster (lumen/sim.hpp).
void add_sim_flags(CLI::App& app, sim_options& sim) {
  app
    .add_option_function<std::string>(
      "--simulate",
      [&sim](const std::string& seed) {
        sim.enabled = true;
        if (seed.empty())
          return;
        try {
          size_t used = 0;
          sim.seed = std::stoull(seed, &used);
          if (used != seed.size() || seed[0] == '-')
            throw std::invalid_argument("");
        } catch (const std::exception&) {
          throw CLI::ValidationError("--simulate",
                                     "takes the run's seed, a whole number, "
                                     "as --simulate=SEED; got '" +
                                       seed + "'");
        }
      },
      "run in a simulated cluster in this process, seeded with SEED "
      "(default 1; $LUMEN_SIMULATE=SEED)")
    ->expected(0, 1)
    ->type_name("[=SEED]");
  app
    .add_option("--sim-nodes", sim.nodes,
                "simulated nodes, node-0 (the script's) to node-<N-1> "
                "(default 3)")
    ->type_name("N")
    ->check(CLI::Range(1, 1024));
  app
    .add_option_function<std::string>(
      "--sim-link",
      [&sim](const std::string& text) {
        try {
          sim::parse_link(text, sim);
        } catch (const usage_error& e) {
          throw CLI::ValidationError("--sim-link", e.what());
        }
      },
      "every simulated link's one-way latency and bandwidth (default "
      "50us,10Gbit)")
    ->type_name("LATENCY,BANDWIDTH");
  app
    .add_option_function<std::string>(
      "--sim-jitter",
      [&sim](const std::string& text) {
        try {
          sim.jitter = sim::parse_duration(text);
        } catch (const usage_error& e) {
          throw CLI::ValidationError("--sim-jitter", e.what());
        }
      },
      "up to this much more latency for each message, drawn from the seed "
      "(default 0)")
    ->type_name("D");
  app
    .add_option_function<std::string>(
      "--sim-slow",
      [&sim](const std::string& text) {
        try {
          sim.slow = parse_resources(text);
        } catch (const CLI::ValidationError&) {
          throw CLI::ValidationError("--sim-slow",
                                     "takes node=factor pairs separated by "
                                     "commas, e.g. node-2=3; got '" +
                                       text + "'");
        }
      },
      "simulated nodes whose compute takes FACTOR times as long")
    ->type_name("NODE=FACTOR,...");
  app
    .add_option_function<std::vector<std::string>>(
      "--sim-fault",
      [&sim](const std::vector<std::string>& all) {
        for (auto& text : all) {
          try {
            (void)sim::parse_fault(text);
          } catch (const usage_error& e) {
            throw CLI::ValidationError(e.what());
          }
          sim.faults.push_back(text);
        }
      },
      "a fault of the simulated run, e.g. at=2s,kill=node-1 or "
      "at=1s,partition=node-1+node-2,for=3s (lumen/sim.hpp); repeatable")
    ->type_name("KEY=VALUE,...")
    ->allow_extra_args(false);
  app
    .add_option("--sim-faults", sim.faults_file,
                "faults of the simulated run from a JSON file: an array of "
                "objects with --sim-fault's keys")
    ->type_name("F")
    ->check(CLI::ExistingFile);
  app
    .add_option_function<std::string>(
      "--sim-chaos",
      [&sim](const std::string& text) {
        try {
          (void)sim::parse_chaos(text);
        } catch (const usage_error& e) {
          throw CLI::ValidationError(e.what());
        }
        sim.chaos = text;
      },
      "faults drawn from the seed, each kind's rate a virtual second: "
      "kill=R,partition=R,slow=R")
    ->type_name("KIND=RATE,...");
  app
    .add_option("--sim-log", sim.log_file,
                "write the simulated run's events there, a JSON object a "
                "line")
    ->type_name("F")
    ->check(non_empty());
  app
    .add_option("--sim-replay", sim.replay_file,
                "check the simulated run against a log --sim-log wrote: it "
                "stops at the first event that differs, naming it")
    ->type_name("F")
    ->check(CLI::ExistingFile);
}

/// name=amount pairs separated by commas, e.g. cpu=2,gpu=1.
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
      if (used != item.size() - eq - 1 || !std::isfinite(v) || v < 0)
        throw std::invalid_argument("");
      out[item.substr(0, eq)] = v;
    } catch (const std::exception&) {
      throw CLI::ValidationError("--resources",
                                 "takes name=amount pairs separated by "
                                 "commas, e.g. cpu=2,gpu=1; got '" +
                                   item + "'");
    }
  }
  return out;
}

} // namespace

CLI::Validator non_empty() {
  return CLI::Validator(
    [](std::string& text) -> std::string {
      return text.empty() ? "must not be empty" : "";
    },
    "", "non-empty");
}

void add_init_flags(CLI::App& app, init_options& opts) {
  app
    .add_option("--num-cpus", opts.num_cpus,
                "threads that run tasks (default: one per core)")
    ->type_name("N")
    ->check(CLI::Range(1, 4096));
  app
    .add_option_function<std::string>(
      "--resources",
      [&opts](const std::string& text) {
        opts.resources = parse_resources(text);
      },
      "resources this process offers to work that asks for them (default: "
      "cpu=<task threads>)")
    ->type_name("NAME=AMOUNT,...");
  app
    .add_option("--address", opts.address,
                "join the cluster whose head listens there (default: "
                "$LUMEN_ADDRESS, else an embedded cluster)")
    ->type_name("HOST:PORT")
    ->check(address_check());
  app
    .add_option("--token-file", opts.token_file,
                "the cluster token (default: $LUMEN_TOKEN_FILE, else "
                "~/.lumen/cluster-token)")
    ->type_name("F")
    ->check(non_empty());
  add_tls_flags(app, opts.tls);
}

void add_tls_flags(CLI::App& app, tls_options& tls) {
  app.add_flag("--tls", tls.enabled,
               "encrypt links to the cluster with TLS 1.3, keyed by the "
               "token unless certificates are given (default: $LUMEN_TLS=1)");
  app
    .add_option("--tls-cert", tls.cert_file,
                "PEM certificate this process shows (implies --tls; "
                "default: $LUMEN_TLS_CERT)")
    ->type_name("F")
    ->check(CLI::ExistingFile);
  app
    .add_option("--tls-key", tls.key_file,
                "PEM private key of --tls-cert (default: $LUMEN_TLS_KEY)")
    ->type_name("F")
    ->check(CLI::ExistingFile);
  app
    .add_option("--tls-ca", tls.ca_file,
                "PEM certificates a peer's must be signed by (default: "
                "$LUMEN_TLS_CA, else --tls-cert itself)")
    ->type_name("F")
    ->check(CLI::ExistingFile);
}

init_options parse_init_flags(int argc, char** argv, bool& help,
                              bool positional) {
  init_options opts;
  help = false;
  CLI::App app{"Lumen flags", "lumen::init"};
  build_init_app(app, opts, help);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    throw usage_error("lumen::init: " + std::string{e.what()} + "\n" +
                      init_flags_help());
  }
  for (auto& extra : app.remaining())
    if (extra.rfind("--", 0) == 0 || !positional)
      throw usage_error(
        "lumen::init: unknown " +
        std::string{extra.rfind("--", 0) == 0 ? "flag" : "argument"} + " '" +
        extra + "'.\n" + init_flags_help() +
        "To use flags of your own, parse them yourself and "
        "call lumen::init(lumen::init_options{...}).");
  return opts;
}

} // namespace lumen::detail

namespace lumen {

init_options parse_init_flags(const std::vector<std::string>& args) {
  init_options opts;
  bool help = false;
  CLI::App app{"Lumen flags", "lumen::init"};
  detail::build_init_app(app, opts, help);
  try {
    // CLI11 takes the arguments last first.
    app.parse(std::vector<std::string>(args.rbegin(), args.rend()));
  } catch (const CLI::ParseError& e) {
    throw usage_error(e.what());
  }
  auto rest = app.remaining();
  if (help)
    rest.insert(rest.begin(), "--help");
  if (!rest.empty())
    throw usage_error(
      "unknown " +
      std::string{rest.front().rfind("--", 0) == 0 ? "flag" : "argument"} +
      " '" + rest.front() + "'");
  return opts;
}

std::string init_flags_help() {
  init_options opts;
  bool help = false;
  CLI::App app{"Lumen flags (lumen::init)", "lumen::init"};
  detail::build_init_app(app, opts, help);
  return app.help();
}

} // namespace lumen
