#include "exercise_files.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "lumen/errors.hpp"
#include "lumen/util/files.hpp"

#include "exercise_toolchain.hpp"

namespace lumen::cli {

std::vector<std::string> split(const std::string& s, char by) {
  std::vector<std::string> out;
  std::istringstream in{s};
  for (std::string item; std::getline(in, item, by);)
    if (!item.empty())
      out.push_back(item);
  return out;
}

std::string read_file(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  return util::read_rest(in);
}

installation find_installation() {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  auto prefix = exe.parent_path().parent_path();
  installation where;
  if (!ec && fs::is_directory(prefix / toolchain::exercisedir)) {
    where.installed = true;
    where.root = prefix;
    where.exercises = prefix / toolchain::exercisedir;
    where.includes = {prefix / toolchain::includedir};
    where.references = prefix / toolchain::referencedir;
    for (auto& name : split(toolchain::installed_libraries, ';'))
      where.libraries.push_back(prefix / toolchain::libdir / name);
    return where;
  }
  fs::path source{toolchain::source_dir};
  where.root = source;
  where.exercises = source / "examples" / "exercises";
  if (!fs::is_directory(where.exercises))
    throw usage_error("the exercises are neither beside this lumen (" +
                      (prefix / toolchain::exercisedir).string() +
                      ") nor in the source tree it was built from (" +
                      where.exercises.string() +
                      "); install Lumen with `cmake --install .build` and "
                      "run the installed lumen");
  where.includes = {source / "runtime" / "include",
                    source / "actors" / "include"};
  for (auto& lib : split(toolchain::build_libraries, ';'))
    where.libraries.emplace_back(lib);
  where.references = toolchain::built_references;
  return where;
}

std::vector<exercise> load_exercises(const fs::path& root) {
  std::vector<exercise> all;
  for (auto& entry : fs::directory_iterator(root)) {
    auto spec = entry.path() / "exercise.json";
    if (!fs::is_regular_file(spec))
      continue;
    try {
      auto j = nlohmann::json::parse(read_file(spec));
      exercise topic;
      topic.topic = j.at("id").get<std::string>();
      topic.topic_title = j.at("title").get<std::string>();
      topic.order = j.at("order").get<int>();
      topic.home = entry.path();
      for (auto& part : j.at("parts")) {
        auto e = topic;
        e.id = part.at("id").get<std::string>();
        e.title = part.at("title").get<std::string>();
        e.learner_file = part.at("learner_file").get<std::string>();
        // "01a_starter.cpp": "01a_solution.cpp".
        auto at = e.learner_file.rfind("_starter");
        if (at != std::string::npos)
          e.reference_file = std::string{e.learner_file}.replace(
            at, std::string{"_starter"}.size(), "_solution");
        e.hints = part.value("hints", std::vector<std::string>{});
        e.steps = part.contains("step_fields");
        all.push_back(std::move(e));
      }
    } catch (const nlohmann::json::exception& ex) {
      throw usage_error(spec.string() + " is not a valid exercise.json (" +
                        ex.what() +
                        "); reinstall Lumen to get the exercises back");
    }
  }
  if (all.empty())
    throw usage_error("no exercises in " + root.string() +
                      "; reinstall Lumen to get them back");
  // A topic's parts stay in the order its file gives.
  std::stable_sort(all.begin(), all.end(),
                   [](auto& a, auto& b) { return a.order < b.order; });
  return all;
}

const exercise& find_exercise(const std::vector<exercise>& all,
                              const std::string& id) {
  for (auto& e : all)
    if (e.id == id)
      return e;
  std::string ids;
  for (auto& e : all)
    ids += (ids.empty() ? "" : ", ") + e.id;
  throw usage_error("no exercise '" + id + "'; there are " + ids);
}

const char* to_string(status s) {
  switch (s) {
    case status::not_started:
      return "not started";
    case status::failing:
      return "failing";
    case status::passing:
      return "passing";
  }
  return "?";
}

workspace::workspace(fs::path dir, const std::vector<exercise>& all)
  : dir_(std::move(dir))
  , state_file_(dir_ / ".state.json") {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw usage_error("cannot make the exercises' folder " + dir_.string() +
                      " (" + ec.message() + "); choose another with --dir");
  for (auto& e : all) {
    auto mine = file_of(e);
    if (fs::exists(mine))
      continue; // the learner's work: never overwritten
    fs::create_directories(mine.parent_path());
    fs::copy_file(e.home / e.learner_file, mine);
  }
  if (fs::exists(state_file_)) {
    try {
      auto j = nlohmann::json::parse(read_file(state_file_));
      for (auto& [id, v] : j.items()) {
        entry en;
        auto s = v.value("status", std::string{"not started"});
        en.verdict = s == "passing"   ? status::passing
                     : s == "failing" ? status::failing
                                      : status::not_started;
        en.hints = v.value("hints", 0);
        state_.emplace_back(id, en);
      }
    } catch (const nlohmann::json::exception&) {
      // A damaged state file costs only the verdicts and hint counts,
      // which the next checks and hints rebuild.
      state_.clear();
    }
  }
}

fs::path workspace::file_of(const exercise& e) const {
  return dir_ / e.id / e.learner_file;
}

fs::path workspace::build_dir_of(const exercise& e) const {
  return dir_ / ".build" / e.id;
}

const workspace::entry* workspace::find(const std::string& id) const {
  for (auto& [k, v] : state_)
    if (k == id)
      return &v;
  return nullptr;
}

workspace::entry& workspace::at(const std::string& id) {
  for (auto& [k, v] : state_)
    if (k == id)
      return v;
  return state_.emplace_back(id, entry{}).second;
}

status workspace::status_of(const exercise& e) const {
  auto* en = find(e.id);
  return en ? en->verdict : status::not_started;
}

void workspace::set_status(const exercise& e, status s) {
  at(e.id).verdict = s;
  save();
}

int workspace::hints_shown(const exercise& e) const {
  auto* en = find(e.id);
  return en ? en->hints : 0;
}

void workspace::set_hints_shown(const exercise& e, int n) {
  at(e.id).hints = n;
  save();
}

void workspace::reset(const exercise& e) {
  fs::copy_file(e.home / e.learner_file, file_of(e),
                fs::copy_options::overwrite_existing);
}

void workspace::save() const {
  nlohmann::json j = nlohmann::json::object();
  for (auto& [id, en] : state_)
    j[id] = {{"status", to_string(en.verdict)}, {"hints", en.hints}};
  auto tmp = state_file_;
  tmp += ".tmp";
  {
    std::ofstream out{tmp};
    out << j.dump(2) << "\n";
  }
  fs::rename(tmp, state_file_); // whole or not at all
}

std::string render_markdown(const std::string& text, bool color) {
  static const std::regex link{R"(\[([^\]]+)\]\(([^)]+)\))"};
  static const std::regex strong{R"(\*\*([^*]+)\*\*)"};
  std::istringstream in{text};
  std::ostringstream out;
  bool code = false;
  const char* bold = color ? "\033[1m" : "";
  const char* dim = color ? "\033[2m" : "";
  const char* plain = color ? "\033[0m" : "";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      code = !code;
      continue;
    }
    if (code) {
      out << "    " << dim << line << plain << "\n";
      continue;
    }
    line = std::regex_replace(line, link, "$1 ($2)");
    line = std::regex_replace(line, strong,
                              color ? "\033[1m$1\033[0m" : std::string{"$1"});
    size_t level = 0;
    while (level < line.size() && line[level] == '#')
      ++level;
    if (level > 0 && level < line.size() && line[level] == ' ') {
      auto title = line.substr(level + 1);
      out << bold << title << plain << "\n";
      if (level <= 2)
        out << std::string(title.size(), level == 1 ? '=' : '-') << "\n";
      continue;
    }
    out << line << "\n";
  }
  return out.str();
}

std::string part_of_readme(const std::string& readme,
                           const std::string& part_id) {
  std::istringstream in{readme};
  std::string out;
  bool keep = true;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0)
      keep = line.rfind("## Part ", 0) != 0 ||
             line.find(part_id) != std::string::npos;
    if (keep)
      out += line + "\n";
  }
  return out;
}

} // namespace lumen::cli
