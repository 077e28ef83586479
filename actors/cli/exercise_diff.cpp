#include "exercise_diff.hpp"

#include <cctype>
#include <cstdio>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

namespace lumen::cli {

namespace {

using json = nlohmann::ordered_json;

/// The JSON objects among `output`'s lines, in order (a line that does not
/// parse is kept as a string, which then only equals itself).
std::vector<json> steps_of(const std::string& output) {
  std::vector<json> out;
  std::istringstream in{output};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() != '{')
      continue;
    auto j = json::parse(line, nullptr, false);
    out.push_back(j.is_discarded() ? json(line) : std::move(j));
  }
  return out;
}

bool counts_only(const std::string& key) {
  return key == "seq" || key == "work";
}

/// A line as the learner reads it: without what only counts.
std::string shown(const json& j) {
  if (!j.is_object())
    return j.dump();
  json kept = json::object();
  for (auto& [k, v] : j.items())
    if (!counts_only(k))
      kept[k] = v;
  return kept.dump();
}

/// "event 41 at 12.300 ms" for an event of a simulated run, "step 3" for a
/// step that numbers itself, else "line 3".
std::string where(const json& j, size_t index) {
  if (j.is_object() && j.contains("kind") && j.contains("t") &&
      j["t"].is_number()) {
    char at[64];
    std::snprintf(at, sizeof(at), " at %.3f ms", j["t"].get<double>() / 1e6);
    auto seq = j.contains("seq") ? j["seq"].dump() : std::to_string(index + 1);
    return "event " + seq + at;
  }
  if (j.is_object() && j.contains("step"))
    return "step " + j["step"].dump();
  return "line " + std::to_string(index + 1);
}

/// A difference inside two lines: where (a field's path, as
/// "ranks[1].sent_chunk") and the two values there.
struct difference {
  std::string path;
  json mine, theirs;
};

/// The first difference between `mine` and `theirs` below `path`, going
/// into objects and arrays; fields in the reference's order, what happened
/// (kind, node, what, the part's state) before its size and time.
bool first_in(const json& mine, const json& theirs, const std::string& path,
              difference& out) {
  if (mine.is_object() && theirs.is_object()) {
    std::vector<std::string> keys;
    for (auto& [k, v] : theirs.items())
      if (!counts_only(k) && k != "t" && k != "bytes")
        keys.push_back(k);
    for (auto& [k, v] : mine.items())
      if (!counts_only(k) && !theirs.contains(k))
        keys.push_back(k);
    for (auto k : {"bytes", "t"})
      if (theirs.contains(k) || mine.contains(k))
        keys.push_back(k);
    for (auto& k : keys) {
      // A key that is not a name (a histogram's "3") as ["3"].
      bool name = !k.empty() && !std::isdigit(static_cast<unsigned char>(k[0]));
      auto sub =
        name ? (path.empty() ? k : path + "." + k) : path + "[\"" + k + "\"]";
      if (!mine.contains(k) || !theirs.contains(k)) {
        out = {sub, mine.value(k, json("absent")),
               theirs.value(k, json("absent"))};
        return true;
      }
      if (first_in(mine[k], theirs[k], sub, out))
        return true;
    }
    return false;
  }
  if (mine.is_array() && theirs.is_array() && mine.size() == theirs.size()) {
    for (size_t i = 0; i < mine.size(); ++i)
      if (first_in(mine[i], theirs[i], path + "[" + std::to_string(i) + "]",
                   out))
        return true;
    return false;
  }
  if (mine == theirs)
    return false;
  out = {path, mine, theirs};
  return true;
}

/// The last line of `output` that is not a step: what a run that stopped
/// said last.
std::string last_words(const std::string& output) {
  std::istringstream in{output};
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty() && line.front() != '{' && line.rfind("lumen: ", 0) != 0)
      last = line;
  return last;
}

} // namespace

std::string first_difference(const std::string& yours,
                             const std::string& reference) {
  auto mine = steps_of(yours), theirs = steps_of(reference);
  for (size_t i = 0; i < mine.size() || i < theirs.size(); ++i) {
    if (i == mine.size()) {
      auto said = last_words(yours);
      return "your run stopped after " + std::to_string(i) + " lines" +
             (said.empty() ? "" : " (it said: " + said + ")") +
             "; the reference's went on with " + where(theirs[i], i) +
             ":\n  reference: " + shown(theirs[i]);
    }
    if (i == theirs.size())
      return "your run went on past the reference's end (" + std::to_string(i) +
             " lines) with " + where(mine[i], i) +
             ":\n  yours:     " + shown(mine[i]);
    if (shown(mine[i]) == shown(theirs[i]))
      continue;
    auto said = where(theirs[i], i);
    difference d;
    if (first_in(mine[i], theirs[i], "", d) && !d.path.empty())
      said += ": " + d.path + " is " + d.mine.dump() + " in yours, " +
              d.theirs.dump() + " in the reference's";
    return said + "\n  yours:     " + shown(mine[i]) +
           "\n  reference: " + shown(theirs[i]);
  }
  return "";
}

} // namespace lumen::cli
