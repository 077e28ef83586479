#include "doctor.hpp"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <lumen/collective.hpp>
#include <lumen/errors.hpp>
#include <lumen/init.hpp>

namespace lumen::cli {

namespace {

/// "rank 2 (node-1 on host-a, pid 1236)": where a member's key says it is.
std::string who(const nlohmann::json& group, int rank) {
  auto out = "rank " + std::to_string(rank);
  auto& reg = group.at("registered");
  auto key = std::to_string(rank);
  if (reg.contains(key)) {
    auto& w = reg.at(key);
    out += " (" + w.value("node", std::string{"?"}) + " on " +
           w.value("host", std::string{"?"}) + ", pid " +
           std::to_string(w.value("pid", 0)) + ")";
  }
  return out;
}

void print(const nlohmann::json& report) {
  auto& groups = report.at("groups");
  if (groups.empty()) {
    std::cout << "no collective group across processes is running in this "
                 "cluster\n";
    return;
  }
  for (auto& g : groups) {
    auto world = g.at("world").get<int>();
    std::cout << "group '" << g.at("group").get<std::string>() << "': " << world
              << " members, " << g.at("members").size() << " answered\n";
    for (auto& m : g.at("members")) {
      auto rank = m.at("rank").get<int>();
      std::cout << "  " << who(g, rank) << ": "
                << collective::describe_member_text(m.dump());
      // Inside an operation, the one before is the last completed.
      auto& last = m.at("last_completed");
      if (m.at("state") == "in_collective" && !last.is_null())
        std::cout << "; last completed " << last.at("op").get<std::string>()
                  << " at " << last.at("site").get<std::string>()
                  << " (operation " << last.at("seq").get<uint64_t>() << ")";
      std::cout << "\n";
    }
    for (auto& r : g.at("unanswered"))
      std::cout << "  " << who(g, r.get<int>())
                << ": did not answer (its process is gone, stopped or cut "
                   "off)\n";
    std::string behind;
    for (auto& b : g.at("behind")) {
      auto n = b.at("operations_behind").get<uint64_t>();
      behind += (behind.empty() ? "" : ", ") + std::string{"rank "} +
                std::to_string(b.at("rank").get<int>()) + " by " +
                std::to_string(n) + (n == 1 ? " operation" : " operations");
    }
    if (!behind.empty())
      std::cout << "  behind: " << behind << "\n";
  }
}

int doctor_main(int argc, char** argv) {
  CLI::App app{"Where every member of the cluster's collective groups is: "
               "the operation it is in, or how long it has been outside any "
               "collective (a member stuck in its own compute, the usual "
               "hang), its last completed operation, and the members behind. "
               "The cluster's flags (--address, --token-file, --tls...) "
               "are lumen::init's.",
               "lumen doctor"};
  bool json = false;
  std::string group;
  double timeout = 2.0;
  app.add_flag("--json", json, "one JSON object, for tools");
  app.add_option("--group", group, "only this group")->type_name("NAME");
  app
    .add_option("--timeout", timeout,
                "seconds each member has to answer (default 2)")
    ->type_name("SECONDS")
    ->check(CLI::Range(0.01, 600.0));
  app.allow_extras(); // the cluster's flags, for lumen::init
  if (auto code = parse_verb(
        "doctor", [&] { app.parse(argc, argv); }, [&] { return app.help(); },
        "Run `lumen doctor --help` for the flags."))
    return *code;
  init_options opts;
  try {
    opts = parse_init_flags(app.remaining());
  } catch (const usage_error& e) {
    std::cerr << "lumen doctor: " << e.what() << "\n";
    return 2;
  }
  if (opts.address.empty())
    opts.address = "127.0.0.1:6380"; // `lumen start --head`'s port
  try {
    lumen::init(opts);
  } catch (const usage_error& e) {
    std::cerr << "lumen doctor: " << e.what() << "\n";
    return 2;
  } catch (const error& e) {
    std::cerr << "lumen doctor: cannot join the cluster at " << opts.address
              << ": " << e.what() << "\n";
    return 1;
  }
  int rc = 0;
  try {
    auto text = collective::examine_groups(
      group, std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000)));
    if (json)
      std::cout << text << "\n";
    else
      print(nlohmann::json::parse(text));
  } catch (const std::exception& e) {
    std::cerr << "lumen doctor: " << e.what() << "\n";
    rc = 1;
  }
  lumen::shutdown();
  return rc;
}

} // namespace

cli_verb doctor_verb() {
  return {"doctor",
          "where each member of the cluster's collective groups is, and who "
          "is behind (--address HOST:PORT; --json)",
          doctor_main};
}

} // namespace lumen::cli
