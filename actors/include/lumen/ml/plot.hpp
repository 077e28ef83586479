#pragma once

// Line plots as SVG files, for results people would rather see than read
// (loss against time, accuracy by epoch):
//
//   lumen::ml::write_svg_plot("loss.svg", "Loss against time", "seconds",
//                             "loss", {{"sync", xs, ys}, {"async", xs2, ys2}});
//
// No CAF here: tests, exercises and the browser playground use it alike.

#include <string>
#include <vector>

namespace lumen::ml {

/// One line: its legend and its points (x and y of the same length).
struct series {
  std::string name;
  std::vector<double> x, y;
};

/// The plot as SVG text: axes with ticks, one colored line per series,
/// a legend. Throws `usage_error` for a series whose x and y differ in
/// length, or for no points at all.
std::string svg_plot(const std::string& title, const std::string& x_label,
                     const std::string& y_label,
                     const std::vector<series>& lines);

/// Writes svg_plot(...) to `path`; throws `usage_error` naming the path
/// if it cannot be written.
void write_svg_plot(const std::string& path, const std::string& title,
                    const std::string& x_label, const std::string& y_label,
                    const std::vector<series>& lines);

} // namespace lumen::ml
