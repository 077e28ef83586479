#include "exercise_check.hpp"

#include <iomanip>
#include <iostream>

#include <nlohmann/json.hpp>

#include "exercise_diff.hpp"
#include "exercise_live.hpp"

namespace lumen::cli {

namespace {

std::string compile_error(const build_result& b) {
  return "Your file does not compile:\n" + b.summary + "\n";
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
  // --step=json runs what the check runs, or less: the check's deadline.
  std::string yours, theirs;
  run_program(mine.program, {"--step=json"}, s.deadline,
              [&](const char* b, size_t n) { yours.append(b, n); });
  run_program(ref.program, {"--step=json"}, s.deadline,
              [&](const char* b, size_t n) { theirs.append(b, n); });
  auto where = first_difference(yours, theirs);
  if (where.empty())
    return "";
  return "\nWhere your run first leaves the reference's (`lumen exercises "
         "run " +
         e.id + " --step=json`): " + where + "\n";
}

} // namespace

const exercise* next_to_do(const session& s) {
  for (auto& e : s.all)
    if (s.ws.status_of(e) != status::passing)
      return &e;
  return nullptr;
}

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

bool check(session& s, const exercise& e, std::string* transcript) {
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

} // namespace lumen::cli
