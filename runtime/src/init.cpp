#include "lumen/init.hpp"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>

#include "lumen/errors.hpp"
#include "lumen/registry.hpp"

#include "embedded_runtime.hpp"

namespace lumen {

namespace {

std::mutex init_mtx;
std::unique_ptr<detail::embedded_runtime> the_runtime;

// Ends the runtime at exit for programs that forget lumen::shutdown().
struct shutdown_at_exit {
  ~shutdown_at_exit() {
    shutdown();
  }
} shutdown_guard;

int parse_count(const std::string& flag, const std::string& value) {
  try {
    size_t used = 0;
    int n = std::stoi(value, &used);
    if (used == value.size() && n > 0)
      return n;
  } catch (const std::exception&) {
  }
  throw usage_error("lumen::init: " + flag + " needs a positive whole number, "
                    "got '" + value + "'");
}

} // namespace

std::string init_flags_help() {
  return "Lumen flags:\n"
         "  --num-cpus=N   threads that run tasks (default: one per core)\n"
         "  --help         print this help and exit\n";
}

init_options parse_init_flags(int argc, char** argv, bool& help) {
  init_options opts;
  help = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0)
      continue; // positional arguments belong to the program
    auto eq = arg.find('=');
    auto flag = arg.substr(0, eq);
    auto take_value = [&]() -> std::string {
      if (eq != std::string::npos)
        return arg.substr(eq + 1);
      if (i + 1 < argc)
        return argv[++i];
      throw usage_error("lumen::init: " + flag + " needs a value, e.g. "
                        + flag + "=2");
    };
    if (flag == "--help") {
      help = true;
    } else if (flag == "--num-cpus") {
      opts.num_cpus = parse_count(flag, take_value());
    } else {
      throw usage_error("lumen::init: unknown flag '" + arg + "'.\n"
                        + init_flags_help()
                        + "To use flags of your own, parse them yourself and "
                          "call lumen::init(lumen::init_options{...}).");
    }
  }
  return opts;
}

void init(int argc, char** argv) {
  bool help = false;
  init_options opts;
  try {
    opts = parse_init_flags(argc, argv, help);
  } catch (const usage_error& e) {
    // Command-line convention: a bad flag is the user's to fix, not a crash.
    std::cerr << e.what() << "\n";
    std::exit(2);
  }
  if (help) {
    std::cout << init_flags_help();
    std::exit(0);
  }
  init(opts);
}

void init(const init_options& opts) {
  std::lock_guard<std::mutex> guard{init_mtx};
  if (the_runtime)
    throw usage_error("lumen::init was called twice; call lumen::shutdown() "
                      "before initializing again");
  auto errs = detail::registration_errors();
  if (!errs.empty()) {
    std::string msg = "lumen::init: registration errors:";
    for (auto& e : errs)
      msg += "\n  " + e;
    throw usage_error(msg);
  }
  the_runtime = std::make_unique<detail::embedded_runtime>(opts);
}

void shutdown() {
  std::lock_guard<std::mutex> guard{init_mtx};
  the_runtime.reset();
}

bool is_initialized() {
  return the_runtime != nullptr;
}

namespace detail {

const std::string& this_node() {
  static const std::string name = "local";
  return name;
}

runtime& current_runtime() {
  if (!the_runtime)
    throw usage_error("Lumen is not running; call lumen::init() first");
  return *the_runtime;
}

embedded_runtime& embedded() {
  if (!the_runtime)
    throw usage_error("Lumen is not running; call lumen::init() first");
  return *the_runtime;
}

} // namespace detail

} // namespace lumen
