#include "exercises.hpp"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>

#include "lumen/cli.hpp"
#include "lumen/errors.hpp"

#include "exercise_check.hpp"
#include "exercise_live.hpp"
#include "exercise_toolchain.hpp"

namespace lumen::cli {

namespace {

fs::path default_dir() {
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : ".") / ".lumen" / "exercises";
}

const char* mark(status s) {
  switch (s) {
    case status::passing:
      return "[pass]";
    case status::failing:
      return "[fail]";
    case status::not_started:
      break;
  }
  return "[    ]";
}

void print_progress(const session& s) {
  int passing = 0;
  std::cout << "Lumen exercises (your files are in " << s.ws.dir().string()
            << ")\n\n";
  const std::string* topic = nullptr;
  for (auto& e : s.all) {
    if (e.id != e.topic && (topic == nullptr || *topic != e.topic))
      std::printf("  %s  %s\n", e.topic.c_str(), e.topic_title.c_str());
    topic = &e.topic;
    auto st = s.ws.status_of(e);
    passing += st == status::passing;
    std::printf("  %s %-14s %-44s %s\n", mark(st), e.id.c_str(),
                e.title.c_str(), to_string(st));
  }
  std::cout << "\n" << passing << " of " << s.all.size() << " passing. ";
  if (auto* next = next_to_do(s))
    std::cout << "Next: " << next->id << ". Read it with `lumen exercises show "
              << next->id << "`, edit " << s.ws.file_of(*next).string()
              << ", then `lumen exercises check " << next->id << "`.\n";
  else
    std::cout << "All done: every exercise passes.\n";
}

int run(session& s, const exercise& e, const std::string& step,
        const std::string& trace, std::vector<std::string> extra) {
  build_result b;
  if (!built(s, e, b))
    return 1;
  if (!trace.empty()) // the program's lumen::init reads it
    ::setenv("LUMEN_TRACE", fs::absolute(trace).c_str(), 1);
  std::vector<std::string> args;
  if (!step.empty())
    args.push_back(step == "interactive" ? "--step" : "--step=" + step);
  args.insert(args.end(), extra.begin(), extra.end());
  // Stepping waits for Enter, for as long as the learner likes.
  auto deadline = step == "interactive" ? std::chrono::seconds{0} : s.deadline;
  auto r = run_program(b.program, args, deadline);
  if (r.broke()) {
    std::cerr << "lumen exercises: " << describe_failure(r, deadline) << "\n";
    return 1;
  }
  return r.exit_code;
}

int hint(session& s, const exercise& e) {
  int shown = s.ws.hints_shown(e);
  if (e.hints.empty()) {
    std::cout << e.id << " has no hints; its README's steps are the way: "
              << "`lumen exercises show " << e.id << "`\n";
    return 0;
  }
  if (shown >= static_cast<int>(e.hints.size())) {
    std::cout << "That was every hint (" << e.hints.size()
              << "). Here they are again:\n";
    for (size_t i = 0; i < e.hints.size(); ++i)
      std::cout << "  " << i + 1 << ". " << e.hints[i] << "\n";
    return 0;
  }
  std::cout << "Hint " << shown + 1 << " of " << e.hints.size() << ": "
            << e.hints[static_cast<size_t>(shown)] << "\n";
  s.ws.set_hints_shown(e, shown + 1);
  if (shown + 1 < static_cast<int>(e.hints.size()))
    std::cout << "(`lumen exercises hint " << e.id << "` again for the next)\n";
  return 0;
}

int reset(session& s, const exercise& e, bool yes) {
  auto file = s.ws.file_of(e);
  if (!yes) {
    std::cout << "Put the starter back in place of " << file.string()
              << "? Your changes to it are lost. [y/N] " << std::flush;
    std::string answer;
    if (!std::getline(std::cin, answer) ||
        (answer != "y" && answer != "Y" && answer != "yes")) {
      std::cout << "Left as it is.\n";
      return 1;
    }
  }
  s.ws.reset(e);
  std::cout << "Reset " << file.string() << " to the starter.\n";
  return 0;
}

volatile std::sig_atomic_t stop_watching = 0;

/// The wall clock's "15:04:05", for the live page's "saved at".
std::string clock_now() {
  auto t = std::time(nullptr);
  char text[16];
  std::strftime(text, sizeof(text), "%H:%M:%S", std::localtime(&t));
  return text;
}

/// Checks the learner's file on every save; once it passes, goes on to
/// the next part (`move_on`) or keeps watching it. With `page`, each save
/// is a run on the live page too.
int watch(session& s, const exercise* current, bool move_on, live_page* page) {
  std::signal(SIGINT, [](int) { stop_watching = 1; });
  std::signal(SIGTERM, [](int) { stop_watching = 1; });
  if (current == nullptr) {
    std::cout << "Every exercise passes: nothing to watch.\n";
    return 0;
  }
  if (page != nullptr)
    std::cout << "Live page: " << page->url()
              << " (open it in a browser: each save runs there)\n";
  std::error_code ec;
  fs::file_time_type seen{};
  int runs = 0;
  std::cout << "Watching " << s.ws.file_of(*current).string()
            << ": it is checked on every save (Ctrl-C to stop)." << std::endl;
  while (!stop_watching) {
    auto file = s.ws.file_of(*current);
    auto now = fs::last_write_time(file, ec);
    if (!ec && now != seen) {
      seen = now;
      bool pass = page != nullptr
                    ? run_live(s, *current, *page, ++runs, clock_now())
                    : check(s, *current);
      if (pass && move_on) {
        current = next_to_do(s);
        if (current == nullptr)
          return 0;
        seen = {};
        std::cout << "\nWatching " << s.ws.file_of(*current).string()
                  << " now (Ctrl-C to stop)." << std::endl;
        continue;
      }
      std::cout << "\nWaiting for you to save " << file.filename().string()
                << " again..." << std::endl;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return 0;
}

int exercises_main(int argc, char** argv) {
  CLI::App app{"The four exercises: read one, edit your copy of its file, "
               "check it, step through it. Run with no command to see your "
               "progress.",
               "lumen exercises"};
  std::string dir = default_dir().string();
  app.add_option("--dir", dir,
                 "your exercises' folder (default ~/.lumen/exercises)");
  int deadline = 30 * toolchain::slowdown;
  app
    .add_option("--deadline", deadline,
                "seconds a check or a run without --step may take before "
                "it is stopped as stuck (default " +
                  std::to_string(deadline) + ")")
    ->check(CLI::Range(1, 3600));
  std::string id, step, trace;
  bool yes = false;
  std::vector<std::string> extra;
  auto list =
    app.add_subcommand("list", "each exercise's part, its status and file");
  auto show = app.add_subcommand("show", "a part's README");
  show->add_option("ID", id, "e.g. ml_scratch01b")->required();
  auto run_cmd = app.add_subcommand(
    "run", "build your file and run it (--step to stop after each step)");
  run_cmd->add_option("ID", id)->required();
  run_cmd
    ->add_option("--step", step,
                 "after each step: wait for Enter (no value), run on "
                 "(auto), or print JSON lines (json)")
    ->expected(0, 1)
    ->default_str("interactive")
    ->check(CLI::IsMember({"interactive", "auto", "json"}));
  run_cmd
    ->add_option("--trace", trace,
                 "write a timeline of the run there (Chrome trace JSON: open "
                 "it at https://ui.perfetto.dev)")
    ->type_name("FILE");
  run_cmd->add_option("args", extra, "the exercise's own flags");
  auto check_cmd =
    app.add_subcommand("check", "build your file and run its checker");
  check_cmd->add_option("ID", id)->required();
  auto hint_cmd = app.add_subcommand("hint", "the next hint, one at a time");
  hint_cmd->add_option("ID", id)->required();
  auto watch_cmd = app.add_subcommand(
    "watch", "check on every save, and go on to the next once it passes");
  watch_cmd->add_option("ID", id, "where to start (default: the next to do)");
  bool browser = false;
  int port = 0;
  for (auto* cmd : {run_cmd, watch_cmd}) {
    cmd->add_flag("--browser", browser,
                  "serve a live page on localhost: each save runs there, its "
                  "messages drawn as they come, then the check's verdict");
    cmd
      ->add_option("--port", port,
                   "the live page's port (default 0: any free one)")
      ->check(CLI::Range(0, 65535));
  }
  auto reset_cmd =
    app.add_subcommand("reset", "put the starter back in place of your file");
  reset_cmd->add_option("ID", id)->required();
  reset_cmd->add_flag("--yes,-y", yes, "do not ask first");
  app.require_subcommand(0, 1);
  if (auto code = parse_verb(
        "exercises", [&] { app.parse(argc, argv); }, [&] { return app.help(); },
        "Run `lumen exercises --help` for the commands."))
    return *code;
  if (run_cmd->parsed() && run_cmd->count("--step") > 0 && step.empty())
    step = "interactive";
  try {
    auto where = find_installation();
    auto all = load_exercises(where.exercises);
    session s{where, all, workspace{dir, all}, std::chrono::seconds{deadline}};
    if (list->parsed()) {
      for (auto& e : s.all)
        std::printf("%s %-14s %-44s %s\n", mark(s.ws.status_of(e)),
                    e.id.c_str(), e.title.c_str(), s.ws.file_of(e).c_str());
      return 0;
    }
    if (show->parsed()) {
      auto& e = find_exercise(s.all, id);
      std::cout << render_markdown(
                     part_of_readme(read_file(e.home / "README.md"), e.id),
                     ::isatty(1) != 0)
                << "\nYour file: " << s.ws.file_of(e).string()
                << "\nCheck it: lumen exercises check " << e.id << "\n";
      return 0;
    }
    if (browser && (!step.empty() || !trace.empty() || !extra.empty()))
      throw usage_error("--browser runs your program its own way (every "
                        "save, stepped); leave out --step, --trace and the "
                        "exercise's flags");
    std::unique_ptr<live_page> page;
    if (browser)
      page = std::make_unique<live_page>(static_cast<uint16_t>(port));
    if (run_cmd->parsed() && page)
      return watch(s, &find_exercise(s.all, id), false, page.get());
    if (run_cmd->parsed())
      return run(s, find_exercise(s.all, id), step, trace, extra);
    if (check_cmd->parsed())
      return check(s, find_exercise(s.all, id)) ? 0 : 1;
    if (hint_cmd->parsed())
      return hint(s, find_exercise(s.all, id));
    if (watch_cmd->parsed())
      return watch(s, id.empty() ? next_to_do(s) : &find_exercise(s.all, id),
                   true, page.get());
    if (reset_cmd->parsed())
      return reset(s, find_exercise(s.all, id), yes);
    print_progress(s);
    return 0;
  } catch (const usage_error& e) {
    std::cerr << "lumen exercises: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "lumen exercises: " << e.what() << "\n";
    return 1;
  }
}

} // namespace

cli_verb exercises_verb() {
  return {"exercises",
          "the four exercises: `lumen exercises` shows your progress and "
          "the next one",
          exercises_main};
}

} // namespace lumen::cli
