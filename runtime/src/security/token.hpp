#pragma once

#include <cstddef>
#include <string>

namespace lumen::detail {

/// Where the head writes the cluster token and everyone reads it unless
/// told otherwise: $LUMEN_TOKEN_FILE, else ~/.lumen/cluster-token.
std::string default_token_file();

/// The longest token the gate accepts.
constexpr size_t max_token_size = 256;

/// Reads the token in `path`; throws `usage_error` with code
/// `errc::bad_token_file` if it is missing, a directory, empty, too long or
/// readable by others, saying what to do.
std::string read_token(const std::string& path);

/// A fresh token of 64 random hex digits.
std::string random_token();

/// Reads `path` if it exists, else writes a fresh random token there with
/// mode 0600 (its folder 0700) and returns it.
std::string load_or_create_token(const std::string& path);

} // namespace lumen::detail
