#define BOOST_TEST_MODULE plot
#include <boost/test/unit_test.hpp>

// SVG line plots: a line and a legend entry per series, names escaped,
// points inside the frame, and the errors a caller can make.

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <lumen/errors.hpp>
#include <lumen/ml.hpp>

using namespace lumen::ml;

namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

BOOST_AUTO_TEST_SUITE(plot_suite)

BOOST_AUTO_TEST_CASE(each_series_is_a_line_with_its_legend) {
  auto svg = svg_plot(
    "loss <by> time", "seconds", "loss",
    {{"sync", {0, 1, 2}, {2.3, 1.0, 0.5}}, {"a & b", {0, 2}, {2.3, 0.4}}});
  BOOST_TEST(svg.rfind("<svg", 0) == 0u);
  BOOST_TEST(count(svg, "<polyline") == 2u);
  BOOST_TEST(svg.find("loss &lt;by&gt; time") != std::string::npos);
  BOOST_TEST(svg.find("a &amp; b") != std::string::npos);
  BOOST_TEST(svg.find("<by>") == std::string::npos);
  // The lowest loss is at the frame's bottom (y = 400 - 50), the highest
  // at its top (y = 40).
  BOOST_TEST(svg.find(",350 ") != std::string::npos);
  BOOST_TEST(svg.find(",40 ") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_series_and_paths_are_usage_errors) {
  BOOST_CHECK_THROW(svg_plot("t", "x", "y", {{"s", {0, 1}, {1}}}),
                    lumen::usage_error);
  BOOST_CHECK_THROW(svg_plot("t", "x", "y", {}), lumen::usage_error);
  BOOST_CHECK_THROW(
    write_svg_plot("/nonexistent-dir/p.svg", "t", "x", "y", {{"s", {0}, {1}}}),
    lumen::usage_error);
  auto path = "/tmp/lumen-plot-test-" + std::to_string(::getpid()) + ".svg";
  write_svg_plot(path, "t", "x", "y", {{"s", {0, 1}, {1, 1}}}); // flat
  std::ifstream in{path};
  std::stringstream text;
  text << in.rdbuf();
  BOOST_TEST(count(text.str(), "<polyline") == 1u);
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_SUITE_END()
