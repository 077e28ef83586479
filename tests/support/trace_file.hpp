#pragma once

// Reads a trace file as Perfetto would and sums up what the tests check:
// the processes, the spans of each, and the arrows, each matched to its
// other end. Whatever a viewer would reject or silently drop is listed in
// `problems`.

#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lumen::test {

struct trace_span {
  std::string name;
  int64_t pid, tid;
  double ts, dur;
};

struct trace_summary {
  std::map<int64_t, std::string> processes; // pid -> its name
  std::vector<trace_span> spans;            // complete and async spans alike
  size_t flows = 0;                         // arrows with both ends
  size_t cross_process_flows = 0;
  std::vector<std::string> problems;

  /// The spans named `name`.
  std::vector<trace_span> named(const std::string& name) const {
    std::vector<trace_span> out;
    for (auto& s : spans)
      if (s.name == name)
        out.push_back(s);
    return out;
  }

  /// The pids whose spans include one named `name`.
  std::set<int64_t> pids_with(const std::string& name) const {
    std::set<int64_t> out;
    for (auto& s : named(name))
      out.insert(s.pid);
    return out;
  }
};

/// The summary of the trace file at `path`; a file that is not trace-event
/// JSON is one problem naming why.
inline trace_summary read_trace(const std::string& path) {
  trace_summary out;
  std::ifstream in{path};
  if (!in) {
    out.problems.push_back("cannot open " + path);
    return out;
  }
  nlohmann::json doc;
  try {
    in >> doc;
  } catch (const std::exception& e) {
    out.problems.push_back(std::string{"not JSON: "} + e.what());
    return out;
  }
  if (!doc.is_object() || !doc.contains("traceEvents") ||
      !doc["traceEvents"].is_array()) {
    out.problems.push_back("no traceEvents array");
    return out;
  }
  struct end {
    int64_t pid;
    double ts;
  };
  std::map<std::string, end> flow_starts, flow_ends, async_begins;
  for (auto& e : doc["traceEvents"]) {
    std::ostringstream what;
    what << e.dump().substr(0, 200);
    if (!e.is_object() || !e.contains("ph") || !e.contains("pid") ||
        !e.contains("name") || !e["pid"].is_number_integer()) {
      out.problems.push_back("an event without ph, name or pid: " + what.str());
      continue;
    }
    auto ph = e["ph"].get<std::string>();
    auto name = e["name"].get<std::string>();
    auto pid = e["pid"].get<int64_t>();
    if (ph == "M") {
      if (name == "process_name")
        out.processes[pid] = e["args"]["name"].get<std::string>();
      continue;
    }
    if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("tid")) {
      out.problems.push_back("an event without ts or tid: " + what.str());
      continue;
    }
    auto ts = e["ts"].get<double>();
    auto tid = e["tid"].get<int64_t>();
    if (ph == "X") {
      if (!e.contains("dur") || e["dur"].get<double>() < 0)
        out.problems.push_back("a span without a duration: " + what.str());
      else
        out.spans.push_back({name, pid, tid, ts, e["dur"].get<double>()});
    } else if (ph == "b" || ph == "e") {
      auto key = e["cat"].get<std::string>() + "/" + name + "/" +
                 e["id"].dump() + "/" + std::to_string(pid);
      if (ph == "b") {
        async_begins[key] = {pid, ts};
      } else if (auto b = async_begins.find(key); b != async_begins.end()) {
        if (ts < b->second.ts)
          out.problems.push_back("an async span ends before it begins: " +
                                 what.str());
        out.spans.push_back({name, pid, tid, b->second.ts, ts - b->second.ts});
        async_begins.erase(b);
      } else {
        out.problems.push_back("an async end without its begin: " + what.str());
      }
    } else if (ph == "s" || ph == "f") {
      auto key =
        e["cat"].get<std::string>() + "/" + name + "/" + e["id"].dump();
      (ph == "s" ? flow_starts : flow_ends)[key] = {pid, ts};
    } else {
      out.problems.push_back("an event of unknown phase: " + what.str());
    }
  }
  for (auto& [key, b] : async_begins)
    out.problems.push_back("an async span never ends: " + key);
  for (auto& [key, f] : flow_ends) {
    auto s = flow_starts.find(key);
    if (s == flow_starts.end())
      continue; // sent by a process that did not trace: no arrow drawn
    ++out.flows;
    if (s->second.pid != f.pid)
      ++out.cross_process_flows;
  }
  for (auto& s : out.spans)
    if (out.processes.count(s.pid) == 0) {
      out.problems.push_back("spans of pid " + std::to_string(s.pid) +
                             ", which has no process name");
      break;
    }
  return out;
}

} // namespace lumen::test
