#pragma once

// The reporting convention every Lumen benchmark follows: a readable table,
// or with --json one JSON object per line per figure carrying at least
// bench, name, unit, min and median (plus n, bytes, baseline and ratio where
// they apply). Rates are "higher is better": min is the slowest repetition.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace lumen::bench {

struct figure {
  figure(std::string name_, std::string unit_, std::vector<double> samples_,
         long n_, long bytes_ = 0)
    : name(std::move(name_))
    , unit(std::move(unit_))
    , samples(std::move(samples_))
    , n(n_)
    , bytes(bytes_) {}

  std::string name;
  std::string label; // the table's row, if not the name (same name, sizes)
  std::string unit;
  std::vector<double> samples; // one per repetition
  long n = 0;                  // operations per repetition
  long bytes = 0;              // payload bytes per operation, if any
  std::string baseline;        // the figure this one is compared with
  std::string baseline_label;  // and its row in the table
  std::optional<double> ratio; // median / baseline median
  // Further JSON fields, the values already in JSON (e.g. "\"ring\"").
  std::vector<std::pair<std::string, std::string>> extra;

  double min() const {
    return *std::min_element(samples.begin(), samples.end());
  }
  double max() const {
    return *std::max_element(samples.begin(), samples.end());
  }
  double median() const {
    auto s = samples;
    std::sort(s.begin(), s.end());
    auto m = s.size() / 2;
    return s.size() % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
  }
};

/// Command-line options shared by the benchmarks.
struct options {
  bool json = false;
  bool smoke = false; // tiny sizes, one repetition: for ctest
  int reps = 5;
  std::vector<std::string> rest; // flags left for the benchmark itself
};

inline options parse_options(int argc, char** argv, const char* usage) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json") {
      o.json = true;
    } else if (a == "--smoke") {
      o.smoke = true;
      o.reps = 1;
    } else if (a.rfind("--reps=", 0) == 0) {
      try {
        o.reps = std::stoi(a.substr(7));
      } catch (const std::exception&) {
        o.reps = 0;
      }
      if (o.reps < 1)
        throw std::invalid_argument("--reps needs a positive number, got '" +
                                    a.substr(7) + "'");
    } else if (a == "--help") {
      std::printf("%s\n  --json     one JSON object per figure and line\n"
                  "  --smoke    tiny sizes, one repetition (for ctest)\n"
                  "  --reps=N   repetitions per figure (default 5)\n",
                  usage);
      std::exit(0);
    } else {
      o.rest.push_back(a);
    }
  }
  return o;
}

/// The options of benchmark `bench`, which takes no flags of its own;
/// prints what is wrong and exits 2 on a bad flag, as the `lumen` command.
inline options options_or_exit(int argc, char** argv, const char* bench,
                               const std::string& usage) {
  try {
    auto opts =
      parse_options(argc, argv, (std::string{bench} + ": " + usage).c_str());
    if (!opts.rest.empty())
      throw std::invalid_argument("unknown flag '" + opts.rest.front() +
                                  "'; see --help");
    return opts;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", bench, e.what());
    std::exit(2);
  }
}

/// Runs `body` `reps` times; each run performs `n` operations and returns
/// nothing. Records operations per second.
inline std::vector<double> rate(int reps, long n,
                                const std::function<void()>& body) {
  std::vector<double> out;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    body();
    std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    out.push_back(static_cast<double>(n) / dt.count());
  }
  return out;
}

/// `rate` after a pass of `body` left out: for a steady rate whose first
/// pass pays, once a process, for what both ends keep (fresh buffers'
/// page faults: a 64 MiB round trip's first repetition ran at a fifth of
/// the others'), in ours and the baseline alike.
inline std::vector<double> warm_rate(int reps, long n,
                                     const std::function<void()>& body) {
  body();
  return rate(reps, n, body);
}

/// Sets `f.baseline` and `f.ratio` against `base`.
inline void compare(figure& f, const figure& base) {
  f.baseline = base.name;
  f.baseline_label = base.label.empty() ? base.name : base.label;
  f.ratio = f.median() / base.median();
}

inline std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}

inline void print(const std::string& bench, const std::vector<figure>& figs,
                  bool json) {
  if (json) {
    for (auto& f : figs) {
      std::printf("{\"bench\": \"%s\", \"name\": \"%s\", \"unit\": \"%s\", "
                  "\"min\": %.6g, \"median\": %.6g, \"max\": %.6g, "
                  "\"n\": %ld",
                  json_escape(bench).c_str(), json_escape(f.name).c_str(),
                  json_escape(f.unit).c_str(), f.min(), f.median(), f.max(),
                  f.n);
      if (f.bytes > 0)
        std::printf(", \"bytes\": %ld", f.bytes);
      if (!f.baseline.empty())
        std::printf(", \"baseline\": \"%s\", \"ratio\": %.4g",
                    json_escape(f.baseline).c_str(), *f.ratio);
      for (auto& [key, value] : f.extra)
        std::printf(", \"%s\": %s", json_escape(key).c_str(), value.c_str());
      std::printf("}\n");
    }
    return;
  }
  std::printf("%s (min, median and max over repetitions)\n", bench.c_str());
  std::printf("%-34s %12s %12s %12s %-7s %s\n", "figure", "min", "median",
              "max", "unit", "vs baseline");
  for (auto& f : figs) {
    // Small figures (GB/s) keep three significant digits.
    const char* format = f.median() < 100 ? "%-34s %12.3g %12.3g %12.3g %-7s"
                                          : "%-34s %12.0f %12.0f %12.0f %-7s";
    auto& row = f.label.empty() ? f.name : f.label;
    std::printf(format, row.c_str(), f.min(), f.median(), f.max(),
                f.unit.c_str());
    if (!f.baseline.empty())
      std::printf(" %.2fx %s", *f.ratio, f.baseline_label.c_str());
    std::printf("\n");
  }
}

/// Throws if a benchmark's result is not what it should have computed.
inline void verify(bool ok, const std::string& what) {
  if (!ok)
    throw std::runtime_error("benchmark computed a wrong result: " + what);
}

} // namespace lumen::bench
