#define BOOST_TEST_MODULE readme_snippets
#include <boost/test/unit_test.hpp>

// README code blocks are taken from compiled examples: a block preceded by
// <!-- snippet: examples/x.cpp#region --> must equal the lines between
// "// [region]" and "// [/region]" in that file, up to common indentation.

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using lines = std::vector<std::string>;

lines read_lines(const std::string& path) {
  std::ifstream in{path};
  BOOST_REQUIRE_MESSAGE(in, "cannot open " << path);
  lines out;
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}

lines dedent(lines xs) {
  size_t common = std::string::npos;
  for (auto& x : xs)
    if (auto p = x.find_first_not_of(' '); p != std::string::npos)
      common = std::min(common, p);
  for (auto& x : xs)
    x = x.size() >= common && common != std::string::npos ? x.substr(common)
                                                          : std::string{};
  return xs;
}

lines region(const lines& file, const std::string& name) {
  auto begin = std::find_if(file.begin(), file.end(), [&](auto& l) {
    return l.find("// [" + name + "]") != std::string::npos;
  });
  auto end = std::find_if(file.begin(), file.end(), [&](auto& l) {
    return l.find("// [/" + name + "]") != std::string::npos;
  });
  BOOST_REQUIRE_MESSAGE(begin != file.end() && end != file.end() && begin < end,
                        "region [" << name << "] not found");
  return dedent(lines(begin + 1, end));
}

} // namespace

BOOST_AUTO_TEST_SUITE(readme_snippets)

BOOST_AUTO_TEST_CASE(every_snippet_matches_its_compiled_source) {
  const std::string root = LUMEN_SOURCE_DIR;
  auto readme = read_lines(root + "/README.md");
  const std::string marker = "<!-- snippet: ";
  int checked = 0;
  for (size_t i = 0; i < readme.size(); ++i) {
    if (readme[i].rfind(marker, 0) != 0)
      continue;
    auto spec = readme[i].substr(marker.size());
    spec = spec.substr(0, spec.find(" -->"));
    auto hash = spec.find('#');
    BOOST_REQUIRE(hash != std::string::npos);
    auto expected = region(read_lines(root + "/" + spec.substr(0, hash)),
                           spec.substr(hash + 1));
    BOOST_REQUIRE(i + 1 < readme.size() && readme[i + 1].rfind("```", 0) == 0);
    lines block;
    size_t j = i + 2;
    for (; j < readme.size() && readme[j].rfind("```", 0) != 0; ++j)
      block.push_back(readme[j]);
    BOOST_TEST_CONTEXT("README snippet " << spec) {
      BOOST_TEST(dedent(block) == expected, boost::test_tools::per_element());
    }
    ++checked;
    i = j;
  }
  BOOST_TEST(checked > 0);
}

BOOST_AUTO_TEST_SUITE_END()
