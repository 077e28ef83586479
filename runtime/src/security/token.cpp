#include "security/token.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>

#include "lumen/errors.hpp"

namespace lumen::detail {

std::string default_token_file() {
  if (auto env = std::getenv("LUMEN_TOKEN_FILE"); env && *env)
    return env;
  auto home = std::getenv("HOME");
  return std::string{home && *home ? home : "/tmp"} + "/.lumen/cluster-token";
}

std::string read_token(const std::string& path) {
  auto bad = [&](const std::string& what) {
    return usage_error(what, errc::bad_token_file);
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw bad("no cluster token at " + path +
              ": pass --token-file with the file that `lumen start "
              "--head` wrote (or set LUMEN_TOKEN_FILE)");
  if (S_ISDIR(st.st_mode))
    throw bad(path + " is a directory, not a token file: pass --token-file "
                     "with the file that `lumen start --head` wrote");
  // As ssh does with keys: a token others can read is no secret.
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", st.st_mode & 07777);
    throw bad("the token file " + path + " can be read by other users (mode " +
              mode + "); run `chmod 600 " + path + "`");
  }
  std::ifstream in{path};
  std::string token;
  if (!in || !std::getline(in, token) || token.empty())
    throw bad("the token file " + path +
              " is empty: copy the file that `lumen start --head` wrote");
  if (token.size() > max_token_size)
    throw bad("the token in " + path + " is longer than " +
              std::to_string(max_token_size) + " characters");
  return token;
}

std::string random_token() {
  std::random_device rd;
  std::ostringstream hex;
  for (int i = 0; i < 8; ++i)
    hex << std::hex << std::setw(8) << std::setfill('0') << rd();
  return hex.str();
}

std::string load_or_create_token(const std::string& path) {
  if (std::ifstream{path})
    return read_token(path);
  auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0)
    ::mkdir(path.substr(0, slash).c_str(), 0700);
  auto token = random_token();
  auto old_mask = ::umask(077);
  std::ofstream out{path};
  ::umask(old_mask);
  if (!out)
    throw usage_error("cannot write the token file " + path +
                      "; pass --token-file with a writable path");
  out << token << "\n";
  out.close();
  ::chmod(path.c_str(), 0600);
  return token;
}

} // namespace lumen::detail
