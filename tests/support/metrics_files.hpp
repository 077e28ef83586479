#pragma once

// A run folder's metrics files read back as a user's tools would:
// metrics.csv by its header (quoted cells unquoted), result.json a JSON
// object a line.

#include <fstream>
#include <istream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace lumen::test {

/// The cells of the CSV record starting at `in`'s next line; a quoted
/// cell may hold commas, doubled quotes and line breaks. Empty at the end.
inline std::vector<std::string> csv_record(std::istream& in) {
  std::vector<std::string> cells;
  std::string cell;
  bool quoted = false, any = false;
  for (char c; in.get(c);) {
    any = true;
    if (quoted && c == '"' && in.peek() == '"')
      cell += char(in.get());
    else if (c == '"')
      quoted = !quoted;
    else if (!quoted && c == ',')
      cells.push_back(std::exchange(cell, {}));
    else if (!quoted && c == '\n')
      break;
    else
      cell += c;
  }
  if (any)
    cells.push_back(cell);
  return cells;
}

/// metrics.csv's rows, each by its header's names.
inline std::vector<std::map<std::string, std::string>>
csv_by_header(const std::string& path, std::vector<std::string>* header) {
  std::ifstream in{path};
  auto names = csv_record(in);
  if (header != nullptr)
    *header = names;
  std::vector<std::map<std::string, std::string>> rows;
  for (auto cells = csv_record(in); !cells.empty(); cells = csv_record(in)) {
    auto& row = rows.emplace_back();
    for (size_t i = 0; i < names.size() && i < cells.size(); ++i)
      row[names[i]] = cells[i];
  }
  return rows;
}

/// result.json's objects, a line each.
inline std::vector<nlohmann::json> json_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in{path};
  for (std::string line; std::getline(in, line);)
    out.push_back(nlohmann::json::parse(line));
  return out;
}

} // namespace lumen::test
