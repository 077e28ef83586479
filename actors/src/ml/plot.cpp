#include "lumen/ml/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include <lumen/errors.hpp>

namespace lumen::ml {

namespace {

constexpr double width = 640, height = 400;
constexpr double left = 70, right = 150, top = 40, bottom = 50;
const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                        "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

struct range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();

  void take(double v) {
    if (std::isfinite(v)) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  void widen() {
    if (hi - lo < 1e-12) { // a flat line still gets an axis
      lo -= 0.5;
      hi += 0.5;
    }
  }
};

} // namespace

std::string svg_plot(const std::string& title, const std::string& x_label,
                     const std::string& y_label,
                     const std::vector<series>& lines) {
  range xr, yr;
  for (auto& s : lines) {
    if (s.x.size() != s.y.size())
      throw usage_error("svg_plot: series '" + s.name + "' has " +
                        std::to_string(s.x.size()) + " x values and " +
                        std::to_string(s.y.size()) +
                        " y values; give one y per x");
    for (size_t i = 0; i < s.x.size(); ++i) {
      xr.take(s.x[i]);
      yr.take(s.y[i]);
    }
  }
  if (!(xr.lo <= xr.hi))
    throw usage_error("svg_plot: no finite points to plot in '" + title + "'");
  xr.widen();
  yr.widen();
  double pw = width - left - right, ph = height - top - bottom;
  auto px = [&](double x) { return left + (x - xr.lo) / (xr.hi - xr.lo) * pw; };
  auto py = [&](double y) { return top + (yr.hi - y) / (yr.hi - yr.lo) * ph; };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
    << "\" height=\"" << height << "\" font-family=\"sans-serif\" "
    << "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
    << "fill=\"white\"/>\n<text x=\"" << width / 2 << "\" y=\"22\" "
    << "text-anchor=\"middle\" font-size=\"15\">" << escape(title)
    << "</text>\n<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw
    << "\" height=\"" << ph << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (int t = 0; t <= 4; ++t) {
    double fx = xr.lo + (xr.hi - xr.lo) * t / 4;
    double fy = yr.lo + (yr.hi - yr.lo) * t / 4;
    o << "<text x=\"" << px(fx) << "\" y=\"" << top + ph + 16
      << "\" text-anchor=\"middle\">" << number(fx) << "</text>\n"
      << "<text x=\"" << left - 6 << "\" y=\"" << py(fy) + 4
      << "\" text-anchor=\"end\">" << number(fy) << "</text>\n"
      << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\""
      << py(fy) << "\" y2=\"" << py(fy) << "\" stroke=\"#ddd\"/>\n";
  }
  o << "<text x=\"" << left + pw / 2 << "\" y=\"" << height - 12
    << "\" text-anchor=\"middle\">" << escape(x_label) << "</text>\n"
    << "<text x=\"16\" y=\"" << top + ph / 2 << "\" text-anchor=\"middle\" "
    << "transform=\"rotate(-90 16 " << top + ph / 2 << ")\">" << escape(y_label)
    << "</text>\n";
  for (size_t k = 0; k < lines.size(); ++k) {
    auto color = colors[k % (sizeof colors / sizeof *colors)];
    o << "<polyline fill=\"none\" stroke=\"" << color
      << "\" stroke-width=\"1.5\" points=\"";
    for (size_t i = 0; i < lines[k].x.size(); ++i)
      if (std::isfinite(lines[k].x[i]) && std::isfinite(lines[k].y[i]))
        o << px(lines[k].x[i]) << "," << py(lines[k].y[i]) << " ";
    double ly = top + 14 + 18 * static_cast<double>(k);
    o << "\"/>\n<line x1=\"" << left + pw + 10 << "\" x2=\"" << left + pw + 30
      << "\" y1=\"" << ly - 4 << "\" y2=\"" << ly - 4 << "\" stroke=\"" << color
      << "\" stroke-width=\"2\"/>\n<text x=\"" << left + pw + 34 << "\" y=\""
      << ly << "\">" << escape(lines[k].name) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

void write_svg_plot(const std::string& path, const std::string& title,
                    const std::string& x_label, const std::string& y_label,
                    const std::vector<series>& lines) {
  auto text = svg_plot(title, x_label, y_label, lines);
  std::ofstream out{path};
  out << text;
  if (!out.flush())
    throw usage_error("cannot write the plot to '" + path +
                      "'; give a path in a directory you may write to");
}

} // namespace lumen::ml
