#include "exercises.hpp"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "lumen/cli.hpp"
#include "lumen/errors.hpp"

#include "exercise_build.hpp"
#include "exercise_diff.hpp"
#include "exercise_files.hpp"
#include "exercise_live.hpp"

namespace lumen::cli {

namespace {

struct session {
  installation where;
  std::vector<exercise> all;
  workspace ws;
  // The checker's cases take a few seconds: a run far longer is stuck.
  std::chrono::seconds deadline{30};
};

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

/// The first exercise in order that does not pass yet, or null.
const exercise* next_to_do(const session& s) {
  for (auto& e : s.all)
    if (s.ws.status_of(e) != status::passing)
      return &e;
  return nullptr;
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

std::string compile_error(const build_result& b) {
  return "Your file does not compile:\n" + b.summary + "\n";
}

/// Builds `e`; on failure prints why and returns false.
bool built(const session& s, const exercise& e, build_result& out) {
  out = build(s.where, e, s.ws);
  if (out.rebuilt)
    std::cout << "built " << s.ws.file_of(e).filename().string() << " in "
              << std::fixed << std::setprecision(1) << out.seconds << " s\n"
              << std::defaultfloat;
  if (!out.ok)
    std::cout << compile_error(out);
  return out.ok;
}

/// After a failing check of `e` (its program `mine`): where the learner's
/// --step=json run first leaves the reference's, or "".
std::string explain(const session& s, const exercise& e,
                    const build_result& mine) {
  if (!e.steps || e.reference_file.empty())
    return "";
  auto ref = build_reference(s.where, e, s.ws);
  if (!ref.ok)
    return "(the reference did not build, so your run is not compared with "
           "it: " +
           ref.summary + ")\n";
  // Both are short: --step=json runs what the check runs, or less.
  const std::chrono::seconds deadline{10};
  std::string yours, theirs;
  run_program(mine.program, {"--step=json"}, deadline,
              [&](const char* b, size_t n) { yours.append(b, n); });
  run_program(ref.program, {"--step=json"}, deadline,
              [&](const char* b, size_t n) { theirs.append(b, n); });
  auto where = first_difference(yours, theirs);
  if (where.empty())
    return "";
  return "\nWhere your run first leaves the reference's (`lumen exercises "
         "run " +
         e.id + " --step=json`): " + where + "\n";
}

/// Checks `e`, records the verdict and says what next; true if it passes.
/// With `transcript`, what the checker and the explanation said goes
/// there too.
bool check(session& s, const exercise& e, std::string* transcript = nullptr) {
  std::cout << "== checking " << e.id << " (" << e.title << ")\n";
  auto said = [&](const std::string& text) {
    std::cout << text;
    if (transcript != nullptr)
      *transcript += text;
  };
  build_result b;
  if (!built(s, e, b)) {
    s.ws.set_status(e, status::failing);
    if (transcript != nullptr)
      *transcript += compile_error(b);
    said("FAIL: fix the compile error above\n");
    return false;
  }
  output_fn out;
  if (transcript != nullptr)
    out = [&](const char* bytes, size_t n) {
      std::cout.write(bytes, static_cast<std::streamsize>(n));
      std::cout.flush();
      transcript->append(bytes, n);
    };
  auto r = run_program(b.program, {"--check"}, s.deadline, out);
  bool pass = !r.broke() && r.exit_code == 0;
  s.ws.set_status(e, pass ? status::passing : status::failing);
  if (r.broke())
    said("FAIL: " + describe_failure(r, s.deadline) + "\n");
  if (pass) {
    if (auto* next = next_to_do(s))
      std::cout << "\n"
                << e.id << " passes. Next: " << next->id << " (" << next->title
                << "): `lumen exercises show " << next->id << "`.\n";
    else
      std::cout << "\n" << e.id << " passes, and so does every exercise.\n";
  } else if (!r.broke()) {
    // A verdict of the learner's code (a hang or a crash said where it
    // stopped already): where it first went otherwise than the reference.
    said(explain(s, e, b));
    std::cout << "\nStuck? `lumen exercises hint " << e.id
              << "` gives the next hint.\n";
  }
  std::cout.flush(); // `watch` goes on after it
  return pass;
}

/// A run of `e` on the live page: its --step=json lines as they come, then
/// the check's verdict; the terminal shows the check as `watch` does.
bool run_live(session& s, const exercise& e, live_page& page, int number,
              const std::string& saved) {
  nlohmann::json run{{"id", e.id},
                     {"title", e.title},
                     {"number", number},
                     {"saved", saved},
                     {"file", s.ws.file_of(e).string()}};
  page.publish("run", run.dump());
  build_result b;
  if (built(s, e, b)) {
    std::string line;
    run_program(b.program, {"--step=json"}, s.deadline,
                [&](const char* bytes, size_t n) {
                  for (size_t i = 0; i < n; ++i) {
                    if (bytes[i] != '\n') {
                      line += bytes[i];
                      continue;
                    }
                    if (!line.empty() && line.front() == '{')
                      page.publish("step", line);
                    line.clear();
                  }
                });
  }
  std::string transcript;
  bool pass = check(s, e, &transcript);
  page.publish("verdict",
               nlohmann::json{{"pass", pass}, {"text", transcript}}.dump(
                 -1, ' ', false, nlohmann::json::error_handler_t::replace));
  return pass;
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
  int deadline = 30;
  app
    .add_option("--deadline", deadline,
                "seconds a check or a run without --step may take before "
                "it is stopped as stuck (default 30)")
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
