#include "sim/sim_fault_plan.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "lumen/errors.hpp"

namespace lumen::detail::sim {

namespace {

using fields = std::vector<std::pair<std::string, std::string>>;

const char* const fault_keys =
  "the keys are at, kill, restart, partition, slow, factor and for "
  "(lumen/sim.hpp)";

/// `a=1,b=2` as its pairs; throws naming `where`.
fields split_pairs(const std::string& text, const std::string& where) {
  fields out;
  size_t begin = 0;
  while (begin <= text.size()) {
    auto end = text.find(',', begin);
    if (end == std::string::npos)
      end = text.size();
    auto item = text.substr(begin, end - begin);
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw usage_error(where + ": '" + item + "' is not KEY=VALUE");
    out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    begin = end + 1;
  }
  return out;
}

double positive_number(const std::string& text, const std::string& where,
                       const char* what) {
  try {
    size_t used = 0;
    double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v) && v > 0)
      return v;
  } catch (const std::exception&) {
  }
  throw usage_error(where + ": " + what + " '" + text +
                    "' is not a positive number");
}

fault make_fault(const fields& given, const std::string& where) {
  fault f;
  f.source = where;
  int kinds = 0;
  bool has_for = false, has_factor = false;
  for (auto& [key, value] : given) {
    auto node_list = [&](fault::kind k) {
      ++kinds;
      f.what = k;
      f.nodes.clear();
      size_t begin = 0;
      for (;;) {
        auto end = value.find('+', begin);
        f.nodes.push_back(value.substr(begin, end - begin));
        if (end == std::string::npos)
          break;
        begin = end + 1;
      }
    };
    try {
      if (key == "at")
        f.at = parse_duration(value).count();
      else if (key == "for") {
        f.lasting = parse_duration(value).count();
        has_for = true;
      } else if (key == "factor") {
        f.factor = positive_number(value, where, "the factor");
        has_factor = true;
      } else if (key == "kill")
        node_list(fault::kind::kill);
      else if (key == "restart")
        node_list(fault::kind::restart);
      else if (key == "partition")
        node_list(fault::kind::partition);
      else if (key == "slow")
        node_list(fault::kind::slow);
      else
        throw usage_error(where + ": unknown key '" + key + "'; " + fault_keys);
    } catch (const usage_error& e) {
      if (key == "at" || key == "for")
        throw usage_error(where + ": " + key + ": " + e.what());
      throw;
    }
  }
  if (kinds != 1)
    throw usage_error(where +
                      ": name one fault (kill, restart, partition or "
                      "slow) with its node; " +
                      fault_keys);
  if (f.what != fault::kind::partition && f.nodes.size() != 1)
    throw usage_error(where + ": a kill, restart or slowdown is of one node");
  if (f.what == fault::kind::partition && (!has_for || f.lasting <= 0))
    throw usage_error(where + ": a partition needs how long it lasts, as "
                              "for=2s");
  if (f.what == fault::kind::slow && !has_factor)
    throw usage_error(where + ": a slowdown needs its factor, as factor=3");
  return f;
}

/// A JSON value as `--sim-fault` would spell it: seconds for numbers under
/// "at" and "for", a '+'-joined list for a partition's side.
std::string flag_word(const std::string& key, const nlohmann::json& v,
                      const std::string& where) {
  if (v.is_string())
    return v.get<std::string>();
  if (v.is_number()) {
    char text[40];
    std::snprintf(text, sizeof(text), "%.17g", v.get<double>());
    return key == "at" || key == "for" ? std::string{text} + "s" : text;
  }
  if (v.is_array() && key == "partition") {
    std::string out;
    for (auto& n : v) {
      if (!n.is_string())
        break;
      out += (out.empty() ? "" : "+") + n.get<std::string>();
    }
    if (!out.empty())
      return out;
  }
  throw usage_error(where + ": \"" + key + "\" is " + v.dump() +
                    "; give a time as \"2s\" or seconds, a node as "
                    "\"node-1\", a partition's side as [\"node-1\", ...]");
}

} // namespace

fault parse_fault(const std::string& text) {
  auto where = "--sim-fault '" + text + "'";
  return make_fault(split_pairs(text, where), where);
}

std::vector<fault> read_faults(const sim_options& opts) {
  std::vector<fault> out;
  for (auto& text : opts.faults)
    out.push_back(parse_fault(text));
  if (opts.faults_file.empty())
    return out;
  auto file = "--sim-faults " + opts.faults_file;
  std::ifstream in{opts.faults_file};
  if (!in)
    throw usage_error(file + ": cannot read it; give a JSON file of faults");
  nlohmann::json all;
  try {
    all = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw usage_error(file + " is not JSON (" + e.what() +
                      "); give an array of objects such as "
                      "{\"at\": \"2s\", \"kill\": \"node-1\"}");
  }
  if (!all.is_array())
    throw usage_error(file + ": give an array of faults, each an object "
                             "such as {\"at\": \"2s\", \"kill\": \"node-1\"}");
  for (size_t i = 0; i < all.size(); ++i) {
    auto where = file + ", fault " + std::to_string(i + 1);
    if (!all[i].is_object())
      throw usage_error(where + " is not an object; " + fault_keys);
    fields given;
    for (auto& [key, value] : all[i].items())
      given.emplace_back(key, flag_word(key, value, where));
    out.push_back(make_fault(given, where));
  }
  return out;
}

chaos_rates parse_chaos(const std::string& text) {
  chaos_rates out;
  auto where = "--sim-chaos '" + text + "'";
  for (auto& [key, value] : split_pairs(text, where)) {
    auto rate = positive_number(value, where, "the rate");
    if (key == "kill")
      out.kill = rate;
    else if (key == "partition")
      out.partition = rate;
    else if (key == "slow")
      out.slow = rate;
    else
      throw usage_error(where + ": unknown kind '" + key +
                        "'; give kill=R, partition=R and slow=R (faults a "
                        "virtual second)");
  }
  return out;
}

} // namespace lumen::detail::sim
