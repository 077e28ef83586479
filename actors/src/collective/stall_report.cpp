#include "collective/recorder.hpp"

// What a group's records say when it stalls: who is where, who is behind,
// in words and as the file a timeout leaves.

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace lumen::collective::detail {

namespace {

/// Field `key` of `j` (records from another process) if it is a whole
/// number, else `otherwise`.
template <class T>
T whole(const nlohmann::json& j, const char* key, T otherwise) {
  auto i = j.find(key);
  return i != j.end() && i->is_number_integer() ? i->template get<T>()
                                                : otherwise;
}

std::string plural(uint64_t n, const char* one) {
  return std::to_string(n) + " " + one + (n == 1 ? "" : "s");
}

} // namespace

std::string describe_member(const nlohmann::json& m) {
  // Records come from other processes: at() throws on what is missing.
  try {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f s", m.at("for_s").get<double>());
    auto said = [](const nlohmann::json& r) {
      return r.at("op").get<std::string>() + " at " +
             r.at("site").get<std::string>();
    };
    auto seq = [](const nlohmann::json& r) {
      return std::to_string(r.at("seq").get<uint64_t>());
    };
    if (m.at("state") == "in_collective") {
      auto& c = m.at("current").at(m.at("current").size() - 1);
      auto out = "in " + said(c) + " (operation " + seq(c) + ") for " + secs;
      if (m.at("waiting_for").is_number())
        out += ", waiting for rank " +
               std::to_string(m.at("waiting_for").get<int>());
      return out;
    }
    auto& last = m.at("last_completed");
    if (m.at("state") == "failed")
      return "failed in " + said(last) + " (operation " + seq(last) + ") " +
             secs + " ago";
    auto out = std::string{"outside any collective for "} + secs;
    if (last.is_null())
      return out + ", no operation yet";
    return out + ", last called " + said(last) + " as operation " + seq(last);
  } catch (const nlohmann::json::exception&) {
    return "(its records are not readable)";
  }
}

nlohmann::json view_group(const std::string& group, int world,
                          const std::vector<nlohmann::json>& members) {
  std::vector<const nlohmann::json*> by_rank(static_cast<size_t>(world));
  int64_t lead = 0;
  for (auto& m : members) {
    auto r = whole(m, "rank", -1);
    if (r >= 0 && r < world) {
      by_rank[static_cast<size_t>(r)] = &m;
      lead = std::max(lead, whole(m, "operations", int64_t{0}));
    }
  }
  nlohmann::json doc{{"group", group},
                     {"world", world},
                     {"members", nlohmann::json::array()},
                     {"behind", nlohmann::json::array()},
                     {"unanswered", nlohmann::json::array()}};
  std::string said;
  for (int r = 0; r < world; ++r) {
    auto* m = by_rank[static_cast<size_t>(r)];
    if (m == nullptr) {
      doc["unanswered"].push_back(r);
      said += "; rank " + std::to_string(r) +
              " did not answer (its process is gone, stopped or cut off)";
      continue;
    }
    doc["members"].push_back(*m);
    auto ops = whole(*m, "operations", int64_t{0});
    if (ops < lead) {
      doc["behind"].push_back({{"rank", r}, {"operations_behind", lead - ops}});
      said += "; rank " + std::to_string(r) + " is behind by " +
              plural(lead - ops, "operation") + ": " + describe_member(*m);
    }
  }
  if (said.empty() && !doc["members"].empty())
    said = "; no member is behind";
  doc["summary"] = said.empty() ? said : said.substr(2);
  return doc;
}

std::string report_stall(const std::string& group, int world,
                         const std::string& why,
                         const std::vector<nlohmann::json>& members) {
  auto doc = view_group(group, world, members);
  doc["why"] = why;
  doc["written_unix_us"] = unix_us();
  auto said = "; " + doc["summary"].get<std::string>();
  // Characters a group name may hold but a file name should not.
  std::string safe = group;
  for (auto& c : safe)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
      c = '_';
  try {
    auto path = write_records_file("flight-" + safe + ".json", doc);
    return "; flight records of " + std::to_string(doc["members"].size()) +
           " of " + std::to_string(world) + " members in " + path + said;
  } catch (const std::exception& e) {
    return "; the flight records could not be written (" +
           std::string{e.what()} + ")" + said;
  }
}

std::string report_local_stall(const std::string& group, int world,
                               const std::string& why) noexcept {
  // The group's own failure is what the members must hear, whatever
  // befalls the gathering.
  try {
    auto doc = process_records(group);
    if (doc["members"].empty())
      return {};
    std::vector<nlohmann::json> members(doc["members"].begin(),
                                        doc["members"].end());
    return report_stall(group, world, why, members);
  } catch (const std::exception& e) {
    return std::string{"; the flight records could not be gathered ("} +
           e.what() + ")";
  }
}

} // namespace lumen::collective::detail

namespace lumen::collective {

std::string describe_member_text(const std::string& member_json) {
  return detail::describe_member(
    nlohmann::json::parse(member_json, nullptr, false));
}

} // namespace lumen::collective
