#include "train/metrics_log.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "lumen/ml/plot.hpp"
#include "ml/durable_file.hpp"

namespace fs = std::filesystem;

namespace lumen::train::detail {

namespace {

using json = nlohmann::ordered_json;
using clock_type = std::chrono::steady_clock;

// The trainer's own fields of a row, as Ray's result.json names them (a
// loop's metric of the same name takes the field's place).
const char* const rank_field = "rank";
const char* const iteration_field = "training_iteration";
const char* const time_field = "time_total_s";
const char* const attempt_field = "attempt";
const char* const workers_field = "workers"; // the attempt's (elastic)
const std::vector<std::string> own_fields{
  rank_field, iteration_field, time_field, attempt_field, workers_field};

bool own_field(const std::string& name) {
  return std::find(own_fields.begin(), own_fields.end(), name) !=
         own_fields.end();
}

/// A CSV cell holding `text`: quoted, its quotes doubled, if a comma, a
/// quote or a line break would otherwise end it.
std::string csv_text(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos)
    return text;
  std::string out = "\"";
  for (char c : text)
    out += c == '"' ? std::string{"\"\""} : std::string{c};
  return out + "\"";
}

/// The shortest text that reads back as `v`: "2", "0.1", "nan", "-inf".
std::string csv_number(double v) {
  if (std::isnan(v))
    return "nan";
  char buf[32];
  auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  return {buf, end};
}

/// A report as a line of result.json: its fields in `order` first, then
/// the trainer's, then the rest; the trainer's counts as integers, what is not
/// finite as null (JSON has no NaN).
std::string json_line(const metrics& row,
                      const std::vector<std::string>& order) {
  json obj = json::object();
  auto put = [&](const std::string& name, double v) {
    if (!std::isfinite(v))
      obj[name] = nullptr;
    else if (name != time_field && own_field(name) && v == std::floor(v))
      obj[name] = static_cast<int64_t>(v);
    else
      obj[name] = v;
  };
  for (auto* names : {&order, &own_fields})
    for (auto& name : *names)
      if (auto i = row.find(name); i != row.end() && !obj.contains(name))
        put(name, i->second);
  for (auto& [name, v] : row)
    if (!obj.contains(name))
      put(name, v);
  // A name that is not UTF-8 is written with U+FFFD rather than failing
  // the run.
  return obj.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

/// The rows of `file` with their names in the order written; a line a
/// crash cut short is left out.
std::vector<std::pair<metrics, std::vector<std::string>>>
read_rows(const fs::path& file) {
  std::vector<std::pair<metrics, std::vector<std::string>>> rows;
  std::ifstream in{file};
  for (std::string line; std::getline(in, line);) {
    json obj;
    try {
      obj = json::parse(line);
    } catch (const json::exception&) {
      continue;
    }
    if (!obj.is_object())
      continue;
    auto& [row, names] = rows.emplace_back();
    for (auto& [name, v] : obj.items()) {
      if (v.is_number())
        row[name] = v.get<double>();
      else if (v.is_null())
        row[name] = std::numeric_limits<double>::quiet_NaN();
      else
        continue;
      names.push_back(name);
    }
  }
  return rows;
}

void write_text(const fs::path& file, const std::string& text) {
  ml::detail::replace_synced(file.string(), {text.begin(), text.end()});
}

} // namespace

metrics_log::metrics_log(fs::path dir, metrics_layout layout, bool resume)
  : dir_(std::move(dir))
  , layout_(std::move(layout))
  , start_(clock_type::now())
  , plotted_(start_ - std::chrono::hours{1}) {
  if (!layout_.columns.empty())
    columns_ = layout_.columns;
  std::string lines;
  if (resume) {
    for (auto& [row, names] : read_rows(dir_ / "result.json")) {
      if (layout_.keep_on_resume && !layout_.keep_on_resume(row))
        continue;
      add_columns(names);
      row.emplace(rank_field, 0);
      row.emplace(iteration_field, 0);
      row.emplace(time_field, 0);
      auto rank = row[rank_field];
      auto& done = iterations_[std::isfinite(rank) ? int(rank) : 0];
      done = std::max(done, row[iteration_field]);
      if (std::isfinite(row[time_field]))
        time_before_ = std::max(time_before_, row[time_field]);
      lines += json_line(row, columns_);
      rows_.push_back(std::move(row));
    }
  }
  // The files hold what this run keeps, and nothing of a run before.
  write_text(dir_ / "result.json", lines);
  rewrite_csv();
  if (rows_.empty())
    fs::remove(dir_ / "metrics.svg");
  else
    plot(true);
}

void metrics_log::add(const metrics& m, int rank, int attempt, size_t workers,
                      bool sync) {
  auto row = m;
  row.emplace(rank_field, rank);
  row.emplace(iteration_field, ++iterations_[rank]);
  std::chrono::duration<double> took = clock_type::now() - start_;
  row.emplace(time_field, time_before_ + took.count());
  row.emplace(attempt_field, attempt);
  row.emplace(workers_field, double(workers));
  std::vector<std::string> names;
  for (auto& [name, v] : m)
    names.push_back(name);
  bool grew = add_columns(names);
  rows_.push_back(row);
  ml::detail::append_synced((dir_ / "result.json").string(),
                            json_line(row, columns_), sync);
  if (grew)
    rewrite_csv();
  else
    ml::detail::append_synced((dir_ / "metrics.csv").string(), csv_line(row),
                              sync);
}

bool metrics_log::add_columns(const std::vector<std::string>& names) {
  bool grew = false;
  for (auto& n : names)
    if (!own_field(n) &&
        std::find(names_.begin(), names_.end(), n) == names_.end()) {
      names_.push_back(n);
      grew = true;
    }
  if (!grew || !layout_.columns.empty())
    return false;
  columns_ = names_;
  columns_.insert(columns_.end(), own_fields.begin(), own_fields.end());
  return true;
}

std::string metrics_log::csv_line(const metrics& row) const {
  std::string line;
  for (size_t c = 0; c < columns_.size(); ++c) {
    line += c > 0 ? "," : "";
    if (auto i = row.find(columns_[c]); i != row.end())
      line += csv_number(i->second);
  }
  return line + "\n";
}

void metrics_log::rewrite_csv() {
  std::string text;
  for (size_t c = 0; c < columns_.size(); ++c)
    text += (c > 0 ? "," : "") + csv_text(columns_[c]);
  if (!columns_.empty())
    text += "\n";
  for (auto& row : rows_)
    text += csv_line(row);
  write_text(dir_ / "metrics.csv", text);
}

void metrics_log::plot(bool now) {
  // Each plot is drawn from every row: a second apart at most, so that a
  // loop reporting every step is not slowed by it.
  if (!now && clock_type::now() - plotted_ < std::chrono::seconds{1})
    return;
  plotted_ = clock_type::now();
  auto reported = [&](const std::string& name) {
    return std::any_of(rows_.begin(), rows_.end(),
                       [&](auto& r) { return r.count(name) > 0; });
  };
  std::string x = reported("epoch")  ? "epoch"
                  : reported("step") ? "step"
                                     : iteration_field;
  auto shown = layout_.plotted;
  if (shown.empty())
    std::copy_if(names_.begin(), names_.end(), std::back_inserter(shown),
                 [&](auto& n) { return n != x; });
  std::set<double> ranks;
  for (auto& r : rows_)
    ranks.insert(r.at(rank_field));
  std::vector<ml::series> lines;
  for (auto& name : shown)
    for (auto rank : ranks) {
      ml::series s{name, {}, {}};
      if (ranks.size() > 1)
        s.name += " (rank " + csv_number(rank) + ")";
      for (auto& r : rows_) {
        auto xv = r.find(x), yv = r.find(name);
        if (r.at(rank_field) == rank && xv != r.end() && yv != r.end() &&
            std::isfinite(xv->second) && std::isfinite(yv->second)) {
          s.x.push_back(xv->second);
          s.y.push_back(yv->second);
        }
      }
      if (!s.x.empty())
        lines.push_back(std::move(s));
    }
  if (lines.empty())
    return; // nothing finite to draw yet
  auto title = layout_.title.empty() ? dir_.filename().string() : layout_.title;
  write_text(dir_ / "metrics.svg", ml::svg_plot(title, x, "", lines));
}

} // namespace lumen::train::detail
