#pragma once

// `lumen train fashion-mnist` run as a user runs it, and what it leaves:
// the train command suites' common steps.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <lumen/ml.hpp>

#include "process.hpp"

namespace lumen::test {

/// `lumen train fashion-mnist` on a small share of the data, with the
/// flags in `more` instead of these.
inline std::pair<int, std::string> train(const std::string& storage,
                                         const std::string& name,
                                         std::vector<std::string> more = {}) {
  std::vector<std::string> argv{LUMEN_CLI, "train", "fashion-mnist"};
  for (auto [flag, value] : std::vector<std::pair<std::string, std::string>>{
         {"--workers", "2"},
         {"--epochs", "2"},
         {"--limit", "2048"},
         {"--test-limit", "1000"},
         {"--storage", storage},
         {"--name", name}})
    if (std::find(more.begin(), more.end(), flag) == more.end())
      argv.insert(argv.end(), {flag, value});
  argv.insert(argv.end(), more.begin(), more.end());
  return run(argv);
}

inline std::vector<std::string> lines_of(const std::filesystem::path& file) {
  std::ifstream in{file};
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

inline std::vector<char> read_bytes(const std::filesystem::path& file) {
  std::ifstream in{file, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, {}};
}

inline std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in{line};
  for (std::string c; std::getline(in, c, ',');)
    out.push_back(c);
  return out;
}

inline bool has(const std::string& out, const std::string& text) {
  return out.find(text) != std::string::npos;
}

/// The test accuracy of the model in `file` on the first `rows` test
/// images, normalised as its metadata says: what the file alone gives.
inline double accuracy_of(const ml::model_file& file, size_t rows) {
  auto test = ml::load_fashion_mnist(ml::split::test);
  ml::dataset first{test.features.rows(0, rows).clone(),
                    test.labels.rows(0, rows)};
  ml::standardize(first, std::stof(file.metadata.at("input_mean")),
                  std::stof(file.metadata.at("input_std")));
  return ml::make_model(file.spec)->accuracy(file.params.data(), first);
}

} // namespace lumen::test
