#pragma once

#include <string>

namespace lumen::detail {

/// Where the head writes the cluster token and everyone reads it unless
/// told otherwise: $LUMEN_TOKEN_FILE, else ~/.lumen/cluster-token.
std::string default_token_file();

/// Reads the token in `path`; throws `usage_error` saying how to get one.
std::string read_token(const std::string& path);

/// Reads `path` if it exists, else writes a fresh random token there with
/// mode 0600 (its folder 0700) and returns it.
std::string load_or_create_token(const std::string& path);

} // namespace lumen::detail
