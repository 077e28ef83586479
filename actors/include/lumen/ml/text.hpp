#pragma once

// Text as a sequence of tokens, a token for each distinct byte it holds,
// and windows of it as a language model's batches: T tokens an example,
// labelled with the T tokens that follow each.
//
//   auto text = lumen::ml::load_text("/usr/share/games/fortunes");
//   auto batch = lumen::ml::text_windows(text.tokens, {0, 500}, 64);
//   // batch.features: 2 x 64 token ids; batch.labels: 2 x 64 next ones
//
// No CAF here: tests, exercises and the browser playground use it alike.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lumen/ml/data.hpp"

namespace lumen::ml {

struct text_corpus {
  /// The bytes the text holds, sorted: token i is vocab[i].
  std::string vocab;
  /// The text, a token a byte.
  std::vector<uint8_t> tokens;
  /// The files it was read from, in order.
  std::vector<std::string> files;

  /// `text` as tokens; throws `usage_error` naming a byte not in vocab.
  std::vector<uint8_t> encode(const std::string& text) const;
  /// Tokens as text.
  std::string decode(const std::vector<uint8_t>& tokens) const;
};

/// The text of a file, or of every regular file in a folder (by name, less
/// fortune's .dat indexes and symbolic links). Throws `data_error` for a
/// path that is missing, holds no text, or a file that is not text (a NUL
/// byte, or more than 1% control bytes), naming the file and the byte.
text_corpus load_text(const std::string& path);

/// Text cut for training and validation: blocks of `validation_block`
/// tokens (of a tenth of the text where that is less), every tenth block
/// (the 10th, the 20th, ...) held out, the others joined. The held-out
/// text comes from every part of the text: a folder's from all its files,
/// not from the last few (Debian's fortunes, sorted by name, end in four
/// kinds of their own: work, wisdom, zippy, tao).
struct text_split {
  std::vector<uint8_t> train, validation;
};
inline constexpr size_t validation_block = 8192;
text_split split_for_validation(const std::vector<uint8_t>& tokens);

/// The windows of `tokens` that start at `starts`, `length` long: token
/// ids as float32 features, a row a window, labelled (int32) with the
/// token after each.
dataset text_windows(const std::vector<uint8_t>& tokens,
                     const std::vector<size_t>& starts, size_t length);

} // namespace lumen::ml
