#include "lumen/ml/text.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>

#include "lumen/errors.hpp"
#include "lumen/util/files.hpp"

namespace fs = std::filesystem;

namespace lumen::ml {

namespace {

/// Throws unless `bytes` read as text: no NUL, control bytes (but tab,
/// line breaks, backspace, bell, escape, form feed) at most 1%.
void check_text(const std::string& file, const std::string& bytes) {
  size_t control = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c == 0)
      throw data_error(file + ": a NUL byte at offset " + std::to_string(i) +
                         "; it is not text: give a text file, or a folder "
                         "of them",
                       errc::bad_file);
    control += c < 32 && c != '\t' && c != '\n' && c != '\r' && c != '\f' &&
               c != '\v' && c != '\b' && c != '\a' && c != 0x1b;
  }
  if (control * 100 > bytes.size())
    throw data_error(file + ": " + std::to_string(control) + " of its " +
                       std::to_string(bytes.size()) +
                       " bytes are control characters; it is not text: give "
                       "a text file, or a folder of them",
                     errc::bad_file);
}

} // namespace

std::vector<uint8_t> text_corpus::encode(const std::string& text) const {
  std::vector<uint8_t> out;
  for (char c : text) {
    auto at = vocab.find(c);
    if (at == std::string::npos)
      throw usage_error("the byte " +
                        std::to_string(static_cast<unsigned char>(c)) +
                        " is not in the model's vocabulary (the bytes of "
                        "the text it was trained on)");
    out.push_back(uint8_t(at));
  }
  return out;
}

std::string text_corpus::decode(const std::vector<uint8_t>& tokens) const {
  std::string out;
  for (auto t : tokens)
    out += vocab.at(t);
  return out;
}

text_corpus load_text(const std::string& path) {
  text_corpus out;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (auto& e : fs::directory_iterator{path, ec}) {
      auto name = e.path().filename().string();
      if (e.is_symlink() || !e.is_regular_file() ||
          (name.size() > 4 && name.compare(name.size() - 4, 4, ".dat") == 0))
        continue;
      out.files.push_back(e.path().string());
    }
    std::sort(out.files.begin(), out.files.end());
  } else if (fs::is_regular_file(path, ec)) {
    out.files.push_back(path);
  } else {
    throw data_error(path + ": no such file or folder; give a text file or "
                            "a folder of them (apt-get install fortunes "
                            "gives /usr/share/games/fortunes)",
                     errc::missing_file);
  }
  std::string all;
  for (auto& file : out.files) {
    std::ifstream in{file, std::ios::binary};
    auto bytes = util::read_rest(in);
    check_text(file, bytes);
    all += bytes;
  }
  if (all.size() < 2)
    throw data_error(path + ": " + std::to_string(all.size()) +
                       " bytes of text; a language model needs more",
                     errc::bad_file);
  std::array<bool, 256> seen{};
  for (char c : all)
    seen[static_cast<unsigned char>(c)] = true;
  std::array<uint8_t, 256> token{};
  for (size_t b = 0; b < 256; ++b)
    if (seen[b]) {
      token[b] = uint8_t(out.vocab.size());
      out.vocab += char(b);
    }
  out.tokens.reserve(all.size());
  for (char c : all)
    out.tokens.push_back(token[static_cast<unsigned char>(c)]);
  return out;
}

text_split split_for_validation(const std::vector<uint8_t>& tokens) {
  auto block =
    std::max<size_t>(1, std::min(validation_block, tokens.size() / 10));
  text_split out;
  for (size_t at = 0, b = 0; at < tokens.size(); at += block, ++b) {
    auto& to = b % 10 == 9 ? out.validation : out.train;
    auto end = std::min(tokens.size(), at + block);
    to.insert(to.end(), tokens.begin() + long(at), tokens.begin() + long(end));
  }
  return out;
}

dataset text_windows(const std::vector<uint8_t>& tokens,
                     const std::vector<size_t>& starts, size_t length) {
  auto rows = int64_t(starts.size()), n = int64_t(length);
  dataset d{tensor{{rows, n}}, tensor{{rows, n}, dtype::int32}};
  auto x = d.features.data<float>();
  auto y = d.labels.data<int32_t>();
  for (size_t r = 0; r < starts.size(); ++r) {
    if (starts[r] + length >= tokens.size())
      throw usage_error("a window of " + std::to_string(length) +
                        " tokens at " + std::to_string(starts[r]) +
                        " runs past the text's " +
                        std::to_string(tokens.size()));
    for (size_t t = 0; t < length; ++t) {
      x[r * length + t] = float(tokens[starts[r] + t]);
      y[r * length + t] = tokens[starts[r] + t + 1];
    }
  }
  return d;
}

} // namespace lumen::ml
