#define BOOST_TEST_MODULE exercises
#include <boost/test/unit_test.hpp>

// `lumen exercises` as a learner uses it, the real command on a folder of
// the test's own: each exercise's reference passes its checker through
// the tool and each untouched starter fails naming its TODO; hints come
// one at a time and are remembered; reset puts back the starter and
// nothing else; watch re-checks on a save and moves on; a compile error,
// a hang and a crash each come back as such; and the tool works from an
// installed prefix; a run's --trace writes its timeline.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "process.hpp"
#include "trace_file.hpp"

namespace fs = std::filesystem;
using namespace std::chrono;
using lumen::test::process;

namespace {

const std::vector<std::string> ids{
  "ml_scratch01a", "ml_scratch01b", "ml_scratch01c", "ml_scratch02a",
  "ml_scratch02b", "ml_scratch02c", "ml_scratch03a", "ml_scratch03b",
  "ml_scratch04a", "ml_scratch04b", "ml_scratch04c", "ml_scratch04d"};

/// Part `id`'s topic folder and its starter's and reference's names.
struct part_files {
  std::string topic, starter, solution;
};

part_files files_of(const std::string& id) {
  auto topic = id.substr(0, id.size() - 1); // "ml_scratch01a": ml_scratch01
  auto n = id.substr(topic.size() - 2);     // "01a"
  return {topic, n + "_starter.cpp", n + "_solution.cpp"};
}

fs::path reference_of(const std::string& id) {
  auto f = files_of(id);
  return fs::path(EXERCISES_DIR) / f.topic / f.solution;
}

std::pair<int, std::string> tool(const std::string& dir,
                                 std::vector<std::string> args,
                                 const std::string& cli = LUMEN_CLI) {
  args.insert(args.begin(), {cli, "exercises", "--dir", dir});
  return lumen::test::run(args);
}

std::string read(const fs::path& p) {
  std::ifstream in{p};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream{p} << text;
}

fs::path learner_file(const std::string& dir, const std::string& id) {
  return fs::path(dir) / id / files_of(id).starter;
}

/// The learner's file of `id` with `line` put before line `at` (1-based)
/// of the reference.
void reference_with(const std::string& dir, const std::string& id, size_t at,
                    const std::string& line) {
  std::istringstream in{read(reference_of(id))};
  std::ostringstream out;
  size_t n = 0;
  for (std::string text; std::getline(in, text);) {
    if (++n == at)
      out << line << "\n";
    out << text << "\n";
  }
  write(learner_file(dir, id), out.str());
}

/// The learner's file of `id`: the reference with `from` changed to `to`.
void reference_changed(const std::string& dir, const std::string& id,
                       const std::string& from, const std::string& to) {
  auto text = read(reference_of(id));
  auto at = text.find(from);
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, from);
  write(learner_file(dir, id), text.replace(at, from.size(), to));
}

size_t line_of(const std::string& id, const std::string& text) {
  std::istringstream in{read(reference_of(id))};
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find(text) != std::string::npos)
      return n;
  }
  return 0;
}

} // namespace

BOOST_AUTO_TEST_SUITE(exercises)

BOOST_AUTO_TEST_CASE(starters_fail_naming_their_todo_and_references_pass) {
  auto dir = lumen::test::fresh_dir("exercises");
  auto [code, out] = tool(dir, {});
  BOOST_TEST(code == 0, out);
  BOOST_TEST(
    out.find("0 of 12 passing. Next: ml_scratch01a") != std::string::npos, out);
  for (auto& id : ids) {
    auto [failed, said] = tool(dir, {"check", id});
    BOOST_TEST(failed == 1, said);
    BOOST_TEST(said.find("TODO(" + id + ")") != std::string::npos, said);
    BOOST_TEST(said.find("lumen exercises hint " + id) != std::string::npos,
               said);
  }
  for (auto& id : ids) {
    fs::copy_file(reference_of(id), learner_file(dir, id),
                  fs::copy_options::overwrite_existing);
    auto [passed, said] = tool(dir, {"check", id});
    BOOST_TEST(passed == 0, said);
    BOOST_TEST(said.find("PASS") != std::string::npos, said);
  }
  auto [all_code, all] = tool(dir, {});
  BOOST_TEST(all.find("12 of 12 passing. All done") != std::string::npos, all);
  BOOST_TEST(all.find("[pass] ml_scratch04d") != std::string::npos, all);
  // A second check of an unchanged file does not build it again.
  auto [again, said] = tool(dir, {"check", "ml_scratch03a"});
  BOOST_TEST(again == 0);
  BOOST_TEST(said.find("built ") == std::string::npos, said);
  // --step=json through the tool: the states a playground replays.
  auto [stepped, states] = tool(dir, {"run", "ml_scratch03a", "--step=json"});
  BOOST_TEST(stepped == 0, states);
  BOOST_TEST(states.find("\"phase\": \"all-gather\"") != std::string::npos,
             states);
  // --trace: the run's timeline, a span for each of the ring's 2(N-1)
  // steps of the learner's code.
  auto trace = dir + "/ring.json";
  auto [traced, told] = tool(dir, {"run", "ml_scratch03a", "--trace", trace});
  BOOST_TEST(traced == 0, told);
  BOOST_TEST(told.find("wrote the timeline") != std::string::npos, told);
  auto t = lumen::test::read_trace(trace);
  BOOST_TEST(t.problems.empty());
  BOOST_TEST(t.named("ring step").size() == 6u);
}

BOOST_AUTO_TEST_CASE(hints_come_one_at_a_time_and_are_remembered) {
  auto dir = lumen::test::fresh_dir("exercises");
  auto [c1, first] = tool(dir, {"hint", "ml_scratch03a"});
  BOOST_TEST(first.find("Hint 1 of 4: Cut each buffer into N chunks") !=
               std::string::npos,
             first);
  auto [c2, second] = tool(dir, {"hint", "ml_scratch03a"});
  BOOST_TEST(second.find("Hint 2 of 4: Reduce-scatter") != std::string::npos,
             second);
  tool(dir, {"hint", "ml_scratch03a"});
  tool(dir, {"hint", "ml_scratch03a"});
  auto [c5, over] = tool(dir, {"hint", "ml_scratch03a"});
  BOOST_TEST(over.find("That was every hint (4)") != std::string::npos, over);
  // Another exercise's hints are its own.
  auto [c6, other] = tool(dir, {"hint", "ml_scratch01a"});
  BOOST_TEST(other.find("Hint 1 of") != std::string::npos, other);
}

BOOST_AUTO_TEST_CASE(reset_puts_back_the_starter_and_nothing_else) {
  auto dir = lumen::test::fresh_dir("exercises");
  tool(dir, {"hint", "ml_scratch03a"});
  write(learner_file(dir, "ml_scratch03a"), "// my attempt\n");
  write(learner_file(dir, "ml_scratch04a"), "// my other attempt\n");
  // Asked without --yes and no answer given: nothing changes.
  auto [asked, kept] = tool(dir, {"reset", "ml_scratch03a"});
  BOOST_TEST(asked == 1, kept);
  BOOST_TEST(read(learner_file(dir, "ml_scratch03a")) == "// my attempt\n");
  auto [code, out] = tool(dir, {"reset", "ml_scratch03a", "--yes"});
  BOOST_TEST(code == 0, out);
  BOOST_TEST(
    read(learner_file(dir, "ml_scratch03a")) ==
    read(fs::path(EXERCISES_DIR) / "ml_scratch03" / "03a_starter.cpp"));
  BOOST_TEST(read(learner_file(dir, "ml_scratch04a")) ==
             "// my other attempt\n");
  auto [c, hint] = tool(dir, {"hint", "ml_scratch03a"});
  BOOST_TEST(hint.find("Hint 2 of 4") != std::string::npos, hint);
}

BOOST_AUTO_TEST_CASE(a_compile_error_is_its_first_error_on_the_learners_line) {
  auto dir = lumen::test::fresh_dir("exercises");
  auto at = line_of("ml_scratch03a", "void all_gather");
  BOOST_REQUIRE(at > 0);
  reference_with(dir, "ml_scratch03a", at, "int oops = not_declared_anywhere;");
  auto [code, out] = tool(dir, {"check", "ml_scratch03a"});
  BOOST_TEST(code == 1, out);
  BOOST_TEST(out.find("03a_starter.cpp, line " + std::to_string(at) +
                      ": 'not_declared_anywhere' was not declared") !=
               std::string::npos,
             out);
  BOOST_TEST(out.find("int oops = not_declared_anywhere;") != std::string::npos,
             out);
  BOOST_TEST(out.find("compile.log") != std::string::npos, out);
  auto lines = std::count(out.begin(), out.end(), '\n');
  BOOST_TEST(lines < 12, out); // not a page of backtrace
}

BOOST_AUTO_TEST_CASE(a_hang_and_a_crash_are_reported_within_the_deadline) {
  auto dir = lumen::test::fresh_dir("exercises");
  auto at = line_of("ml_scratch03a", "const size_t n = net.ranks();");
  BOOST_REQUIRE(at > 0);
  reference_with(dir, "ml_scratch03a", at,
                 "for (volatile unsigned spin = 0;; spin = spin + 1) {}");
  tool(dir, {"--deadline", "3", "check", "ml_scratch03a"}); // the build
  auto start = steady_clock::now();
  auto [hung, said] = tool(dir, {"--deadline", "3", "check", "ml_scratch03a"});
  auto took = duration<double>(steady_clock::now() - start).count();
  BOOST_TEST(hung == 1, said);
  BOOST_TEST(said.find("did not finish within 3 s and was stopped") !=
               std::string::npos,
             said);
  BOOST_TEST(took < 10.0);
  // Stepping, a hang in the all-gather shows the last step it reached.
  auto gather = line_of("ml_scratch03a", "void all_gather") + 1;
  reference_with(dir, "ml_scratch03a", gather,
                 "for (volatile unsigned spin = 0;; spin = spin + 1) {}");
  auto [stuck, steps] =
    tool(dir, {"--deadline", "5", "run", "ml_scratch03a", "--step=auto"});
  BOOST_TEST(stuck == 1, steps);
  BOOST_TEST(steps.find("step 3 (reduce-scatter)") != std::string::npos, steps);
  BOOST_TEST(steps.find("did not finish within 5 s") != std::string::npos,
             steps);
  reference_with(dir, "ml_scratch03a", at, "{ int* p = nullptr; *p = 1; }");
  auto [crashed, why] = tool(dir, {"check", "ml_scratch03a"});
  BOOST_TEST(crashed == 1, why);
  // A signal, or under LUMEN_SANITIZE the sanitizer's report of it.
  BOOST_TEST(why.find("your program crashed (") != std::string::npos, why);
  BOOST_TEST((why.find("Segmentation fault") != std::string::npos ||
              why.find("null pointer") != std::string::npos ||
              why.find("SEGV") != std::string::npos),
             why);
}

BOOST_AUTO_TEST_CASE(watch_checks_on_every_save_and_moves_on) {
  auto dir = lumen::test::fresh_dir("exercises");
  process w{{LUMEN_CLI, "exercises", "--dir", dir, "watch", "ml_scratch03a"}};
  BOOST_REQUIRE_MESSAGE(w.await_output("Waiting for you to save", minutes(2)),
                        w.output());
  fs::copy_file(reference_of("ml_scratch03a"),
                learner_file(dir, "ml_scratch03a"),
                fs::copy_options::overwrite_existing);
  BOOST_TEST(w.await_output("ml_scratch03a passes", minutes(2)).has_value(),
             w.output());
  BOOST_TEST(
    w.await_output("Watching " + learner_file(dir, "ml_scratch01a").string(),
                   seconds(10))
      .has_value(),
    w.output());
  w.kill(SIGTERM);
}

BOOST_AUTO_TEST_CASE(bad_ids_and_flags_say_what_there_is) {
  auto dir = lumen::test::fresh_dir("exercises");
  auto [code, out] = tool(dir, {"check", "ml_scratch09"});
  BOOST_TEST(code == 2);
  BOOST_TEST(out.find("no exercise 'ml_scratch09'; there are ml_scratch01a, "
                      "ml_scratch01b, ml_scratch01c, ml_scratch02a, "
                      "ml_scratch02b, ml_scratch02c, ml_scratch03a, "
                      "ml_scratch03b, ml_scratch04a, ml_scratch04b, "
                      "ml_scratch04c, ml_scratch04d") != std::string::npos,
             out);
  auto [flag, said] = tool(dir, {"run", "ml_scratch03a", "--step=sideways"});
  BOOST_TEST(flag == 2, said);
  auto [show, readme] = tool(dir, {"show", "ml_scratch03a"});
  BOOST_TEST(show == 0);
  BOOST_TEST(readme.find("```") == std::string::npos, readme);
  BOOST_TEST(readme.find("lumen exercises check ml_scratch03a") !=
               std::string::npos,
             readme);
}

BOOST_AUTO_TEST_CASE(a_part_shows_its_section_and_explains_drivers_that_wait) {
  auto dir = lumen::test::fresh_dir("exercises");
  auto [show, readme] = tool(dir, {"show", "ml_scratch01c"});
  BOOST_TEST(show == 0);
  BOOST_TEST(readme.find("Part ml_scratch01c") != std::string::npos, readme);
  BOOST_TEST(readme.find("Part ml_scratch01b") == std::string::npos, readme);
  // The workers asked one after another: right weights, three times the
  // time, which the simulated cluster measures.
  reference_changed(dir, "ml_scratch01c",
                    "grads.push_back(w.call(&DataParallelWorker::compute_"
                    "gradient, weights));",
                    "grads.push_back(lumen::put(lumen::get(w.call("
                    "&DataParallelWorker::compute_gradient, weights))));");
  auto [code, out] = tool(dir, {"check", "ml_scratch01c"});
  BOOST_TEST(code == 1, out);
  BOOST_TEST(out.find("seed 1: 300 steps took 18.0") != std::string::npos, out);
  BOOST_TEST(out.find("the workers computed one after another") !=
               std::string::npos,
             out);
  BOOST_TEST(out.find("TODO(ml_scratch01c)") != std::string::npos, out);
  // An async loop that waits for every worker each round: the fast ones
  // wait for the straggler.
  reference_changed(dir, "ml_scratch02b",
                    "auto ready = lumen::wait(pending, 1).ready.front();",
                    "lumen::wait(pending, pending.size());\n"
                    "    auto ready = pending[static_cast<size_t>(u) % 4];");
  auto [waited, told] = tool(dir, {"check", "ml_scratch02b"});
  BOOST_TEST(waited == 1, told);
  BOOST_TEST(told.find("seed 1: 400 updates took 12.0") != std::string::npos,
             told);
  BOOST_TEST(told.find("the fast workers waited for the straggler") !=
               std::string::npos,
             told);
  // A driver that waits for what nothing will ever give: the simulated
  // cluster knows everything is waiting, and says so at once.
  reference_changed(dir, "ml_scratch01c",
                    "auto weights = lumen::get(ps.call(&ParameterServer::"
                    "get_weights));",
                    "lumen::promise<int> never;\n  lumen::get(never.ref());\n"
                    "  auto weights = lumen::get(ps.call(&ParameterServer::"
                    "get_weights));");
  auto [stuck, why] = tool(dir, {"check", "ml_scratch01c"});
  BOOST_TEST(stuck == 1, why);
  BOOST_TEST(why.find("seed 1: simulated run (seed 1): nothing is left to "
                      "happen") != std::string::npos,
             why);
  BOOST_TEST(why.find("a deadlock") != std::string::npos, why);
  // A ring whose every rank sends first: each send meets its neighbour's.
  reference_changed(dir, "ml_scratch03b", "if (r % 2 == 0) {", "if (true) {");
  auto [rang, ring] = tool(dir, {"check", "ml_scratch03b"});
  BOOST_TEST(rang == 1, ring);
  BOOST_TEST(ring.find("Every rank was in send_right at once") !=
               std::string::npos,
             ring);
  BOOST_TEST(ring.find("TODO(ml_scratch03b)") != std::string::npos, ring);
}

BOOST_AUTO_TEST_CASE(a_failing_check_says_where_the_run_leaves_the_reference) {
  auto dir = lumen::test::fresh_dir("exercises");
  const std::string leaves = "Where your run first leaves the reference's";
  // A ring that sends the wrong chunk: the first message carrying it, and
  // its values against the reference's.
  reference_changed(dir, "ml_scratch03b",
                    "auto [at, got] = step(r + n - s, r + 2 * n - s - 1);",
                    "auto [at, got] = step(r + n - s + 1, r + 2 * n - s - 1);");
  auto [ring_code, ring] = tool(dir, {"check", "ml_scratch03b"});
  BOOST_TEST(ring_code == 1, ring);
  BOOST_TEST(ring.find("rank 0's element 0 is 5.000000, the sum is 3.000000") !=
               std::string::npos,
             ring);
  BOOST_TEST(ring.find(leaves) != std::string::npos, ring);
  BOOST_TEST(ring.find(": sent[0] is 3 in yours, 1 in the reference's") !=
               std::string::npos,
             ring);
  // A staleness rule one off: the first update that counts it otherwise.
  reference_changed(dir, "ml_scratch02a",
                    "auto staleness = s.version - version;",
                    "auto staleness = s.version - version + 1;");
  auto [stale_code, stale] = tool(dir, {"check", "ml_scratch02a"});
  BOOST_TEST(stale_code == 1, stale);
  BOOST_TEST(stale.find("histogram {\"4\": 1}; expected") != std::string::npos,
             stale);
  BOOST_TEST(stale.find(leaves) != std::string::npos, stale);
  BOOST_TEST(stale.find("histogram[\"0\"] is \"absent\" in yours, 1 in the "
                        "reference's") != std::string::npos,
             stale);
  // A worker that waits for its own future, which it would set after the
  // wait: a deadlock, said at once, naming the calls that wait.
  auto worker =
    read(fs::path(EXERCISES_DIR) / "ml_scratch01" / "server_and_workers.hpp");
  const std::string body =
    "model_->loss_and_gradient(weights.data(), shard_.next(), grad.data());";
  worker.erase(0, worker.find("\n") + 1); // its #pragma once
  auto at = worker.find(body);
  BOOST_REQUIRE(at != std::string::npos);
  worker.replace(
    at, body.size(),
    "lumen::promise<int> mine;\n    lumen::get(mine.ref());\n    " + body +
      "\n    mine.set_value(1);");
  write(learner_file(dir, "ml_scratch01b"),
        worker + "\nint main(int argc, char** argv) {\n  return "
                 "scratch01::part_b::main<scratch01::ParameterServer,\n"
                 "    scratch01::DataParallelWorker>(argc, argv);\n}\n");
  auto [stuck_code, stuck] = tool(dir, {"check", "ml_scratch01b"});
  BOOST_TEST(stuck_code == 1, stuck);
  BOOST_TEST(stuck.find("(a deadlock)") != std::string::npos, stuck);
  BOOST_TEST(stuck.find("waiting: node-") != std::string::npos, stuck);
  BOOST_TEST(stuck.find("'s scratch01::DataParallelWorker::compute_gradient") !=
               std::string::npos,
             stuck);
  BOOST_TEST(stuck.find("your run stopped after") != std::string::npos, stuck);
}

BOOST_AUTO_TEST_CASE(the_installed_tool_works_outside_the_source_tree) {
  auto prefix = lumen::test::fresh_dir("prefix");
  auto [installed, log] = lumen::test::run(
    {"/usr/bin/cmake", "--install", BUILD_DIR, "--prefix", prefix});
  BOOST_REQUIRE_MESSAGE(installed == 0, log);
  auto dir = lumen::test::fresh_dir("exercises");
  auto cli = prefix + "/bin/lumen";
  auto [code, out] = tool(dir, {"check", "ml_scratch03a"}, cli);
  BOOST_TEST(code == 1, out);
  BOOST_TEST(out.find("TODO(ml_scratch03a)") != std::string::npos, out);
  fs::copy_file(fs::path(prefix) / "share/lumen/exercises/ml_scratch03" /
                  "03a_solution.cpp",
                learner_file(dir, "ml_scratch03a"),
                fs::copy_options::overwrite_existing);
  auto [passed, said] = tool(dir, {"check", "ml_scratch03a"}, cli);
  BOOST_TEST(passed == 0, said);
  auto command = read(fs::path(dir) / ".build/ml_scratch03a/command.txt");
  BOOST_TEST(command.find(prefix + "/lib/") != std::string::npos, command);
  BOOST_TEST(command.find(BUILD_DIR) == std::string::npos, command);
}

BOOST_AUTO_TEST_SUITE_END()
