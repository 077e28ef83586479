#define BOOST_TEST_MODULE readme_snippets
#include <boost/test/unit_test.hpp>

// The documentation's code comes from compiled code, and its links lead
// somewhere. In every *.md file of the source tree (build trees,
// node_modules and hidden folders left out):
// - a code block preceded by <!-- snippet: examples/x.cpp#region --> must
//   equal the lines between "// [region]" and "// [/region]" in that file
//   (a path from the repository's root; "# [region]" and "# [/region]" in a
//   CMake file or shell script), up to common indentation; the markers of
//   regions nested inside are left out;
// - a relative link [text](path#anchor) must name a file or folder that
//   exists, and an anchor in a .md file one of its headings.

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

using lines = std::vector<std::string>;

const fs::path root = LUMEN_SOURCE_DIR;

std::optional<lines> read_lines(const fs::path& path) {
  std::ifstream in{path};
  if (!in)
    return std::nullopt;
  lines out;
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::string trimmed(const std::string& s) {
  auto b = s.find_first_not_of(' ');
  auto e = s.find_last_not_of(' ');
  return b == std::string::npos ? std::string{} : s.substr(b, e - b + 1);
}

// Every *.md file under the root, skipping build trees (a CMakeCache.txt),
// hidden folders (.git, .build*) and node_modules.
std::vector<fs::path> markdown_files() {
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator{root};
       it != fs::recursive_directory_iterator{}; ++it) {
    auto name = it->path().filename().string();
    if (it->is_directory()) {
      if (name[0] == '.' || name == "node_modules" ||
          fs::exists(it->path() / "CMakeCache.txt"))
        it.disable_recursion_pending();
    } else if (it->path().extension() == ".md") {
      out.push_back(it->path());
    }
  }
  std::sort(out.begin(), out.end());
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

// What comes before a region marker's "[": a comment in C++, or in CMake
// and shell.
const std::vector<std::string> marker_leads{"// ", "# "};

bool is_region_marker(const std::string& line) {
  auto t = trimmed(line);
  for (auto& lead : marker_leads)
    if (starts_with(t, lead + "[") && t.back() == ']' &&
        t.find(' ', lead.size()) == std::string::npos)
      return true;
  return false;
}

// The region's lines, or nothing when the file lacks its markers.
std::optional<lines> region(const lines& file, const std::string& name) {
  auto marked = [&](const std::string& marker) {
    return std::find_if(file.begin(), file.end(),
                        [&](auto& l) { return trimmed(l) == marker; });
  };
  for (auto& lead : marker_leads) {
    auto begin = marked(lead + "[" + name + "]");
    auto end = marked(lead + "[/" + name + "]");
    if (begin == file.end() || end == file.end() || end < begin)
      continue;
    lines out;
    std::copy_if(begin + 1, end, std::back_inserter(out),
                 [](auto& l) { return !is_region_marker(l); });
    return dedent(out);
  }
  return std::nullopt;
}

// A markdown file's lines outside fenced code blocks, with inline code
// spans blanked, by line number; and its headings' anchors.
struct markdown {
  fs::path path;
  lines text;
  std::map<size_t, std::string> prose;
  std::set<std::string> anchors;
};

// GitHub's anchor for a heading: lower case, punctuation dropped, spaces
// as hyphens, "-1", "-2"... for repeats.
std::string anchor_of(const std::string& heading) {
  std::string out;
  for (unsigned char c : heading.substr(heading.find(' ') + 1)) {
    if (std::isalnum(c) || c == '-' || c == '_' || c >= 0x80)
      out += static_cast<char>(std::tolower(c));
    else if (c == ' ')
      out += '-';
  }
  return out;
}

markdown parse(const fs::path& path, const lines& text) {
  markdown md{path, text, {}, {}};
  std::map<std::string, int> seen;
  bool fenced = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (starts_with(trimmed(text[i]), "```")) {
      fenced = !fenced;
      continue;
    }
    if (fenced)
      continue;
    std::string line = text[i];
    for (size_t a = line.find('`'); a != std::string::npos;) {
      auto b = line.find('`', a + 1);
      if (b == std::string::npos)
        break;
      std::fill(line.begin() + a, line.begin() + b + 1, ' ');
      a = line.find('`', b + 1);
    }
    md.prose[i] = line;
    if (starts_with(line, "#")) {
      auto anchor = anchor_of(text[i]);
      int n = seen[anchor]++;
      md.anchors.insert(n == 0 ? anchor : anchor + "-" + std::to_string(n));
    }
  }
  return md;
}

std::vector<markdown> all_markdown() {
  std::vector<markdown> out;
  for (auto& path : markdown_files()) {
    auto text = read_lines(path);
    BOOST_TEST_REQUIRE(text.has_value(), "cannot read " << path);
    out.push_back(parse(path, *text));
  }
  BOOST_TEST_REQUIRE(!out.empty(), "no *.md file under " << root);
  return out;
}

std::string from_root(const fs::path& p) {
  return p.lexically_relative(root).generic_string();
}

} // namespace

BOOST_AUTO_TEST_SUITE(readme_snippets)

BOOST_AUTO_TEST_CASE(every_snippet_matches_its_compiled_source) {
  const std::string marker = "<!-- snippet: ";
  int checked = 0;
  for (auto& md : all_markdown()) {
    auto& text = md.text;
    for (auto& [i, line] : md.prose) {
      if (!starts_with(line, marker))
        continue;
      auto spec = line.substr(marker.size());
      spec = spec.substr(0, spec.find(" -->"));
      std::ostringstream where;
      where << from_root(md.path) << ", line " << i + 1 << ": snippet " << spec;
      auto hash = spec.find('#');
      auto source = read_lines(root / spec.substr(0, hash));
      auto expected = source && hash != std::string::npos
                        ? region(*source, spec.substr(hash + 1))
                        : std::nullopt;
      if (!source) {
        BOOST_ERROR(where.str() << ": its source file is missing");
      } else if (!expected) {
        BOOST_ERROR(where.str() << ": its source has no such region");
      } else if (i + 1 >= text.size() || !starts_with(text[i + 1], "```")) {
        BOOST_ERROR(where.str() << ": no code block follows it");
      } else {
        lines block;
        for (size_t j = i + 2; j < text.size() && !starts_with(text[j], "```");
             ++j)
          block.push_back(text[j]);
        BOOST_TEST_CONTEXT(where.str()) {
          BOOST_TEST(dedent(block) == *expected,
                     boost::test_tools::per_element());
        }
      }
      ++checked;
    }
  }
  BOOST_TEST(checked > 0, "no snippet found in any *.md file");
}

BOOST_AUTO_TEST_CASE(relative_links_lead_to_files_and_headings_that_exist) {
  auto docs = all_markdown();
  std::map<fs::path, const markdown*> by_path;
  for (auto& md : docs)
    by_path[fs::weakly_canonical(md.path)] = &md;
  int checked = 0;
  for (auto& md : docs) {
    for (auto& [i, line] : md.prose) {
      for (auto at = line.find("]("); at != std::string::npos;
           at = line.find("](", at + 2)) {
        auto end = line.find(')', at);
        if (end == std::string::npos)
          continue;
        auto target = line.substr(at + 2, end - at - 2);
        target = target.substr(0, target.find(' ')); // a "title" after it
        if (target.empty() || target.find("://") != std::string::npos ||
            starts_with(target, "mailto:"))
          continue;
        auto hash = target.find('#');
        auto file = target.substr(0, hash);
        auto anchor = hash == std::string::npos ? "" : target.substr(hash + 1);
        auto path = file.empty()
                      ? md.path
                      : fs::weakly_canonical(md.path.parent_path() / file);
        BOOST_TEST_CONTEXT(from_root(md.path)
                           << ", line " << i + 1 << ": link " << target) {
          BOOST_TEST(fs::exists(path), "no such file: " << path);
          auto linked = by_path.find(fs::weakly_canonical(path));
          if (!anchor.empty() && linked != by_path.end())
            BOOST_TEST(linked->second->anchors.count(anchor) == 1,
                       "no heading with the anchor #" << anchor);
        }
        ++checked;
      }
    }
  }
  BOOST_TEST(checked > 0, "no relative link found in any *.md file");
}

BOOST_AUTO_TEST_SUITE_END()
