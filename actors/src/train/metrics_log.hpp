#pragma once

// The run folder's record of the reports, as Ray Train's progress.csv
// and result.json: metrics.csv (a row a report, a column a field, cells
// of fields a report lacks empty), result.json (a JSON object a line)
// and metrics.svg (the metrics plotted). Rows are appended as reports
// arrive, so that a killed driver leaves the rows so far; a new column
// rewrites metrics.csv whole. A resumed run reads result.json back.

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "lumen/train/trainer.hpp"

namespace lumen::train::detail {

class metrics_log {
public:
  /// Starts the files in `dir` anew, or, if `resume`, with the rows of
  /// its result.json that `layout.keep_on_resume` keeps. Throws
  /// `ml::data_error` naming a file that cannot be written.
  metrics_log(std::filesystem::path dir, metrics_layout layout, bool resume);

  /// Records a report of `rank` in `attempt` of `workers`, numbered after
  /// that rank's earlier ones, written at once; flushed to the disk if
  /// `sync` (a row not flushed goes with the next that is). Throws
  /// `ml::data_error` naming the file.
  void add(const metrics& m, int rank, int attempt, size_t workers, bool sync);

  /// Writes metrics.svg if a second passed since the last time, or if
  /// `now`. Throws `ml::data_error` naming the file.
  void plot(bool now);

private:
  bool add_columns(const std::vector<std::string>& names);
  void rewrite_csv();
  std::string csv_line(const metrics& row) const;

  std::filesystem::path dir_;
  metrics_layout layout_;
  std::vector<metrics> rows_;
  std::vector<std::string> names_;   // the metrics, as they first came
  std::vector<std::string> columns_; // the CSV's
  std::map<int, double> iterations_; // by rank
  double time_before_ = 0;           // time_total_s of the earlier rows
  std::chrono::steady_clock::time_point start_, plotted_;
};

} // namespace lumen::train::detail
