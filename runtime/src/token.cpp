#include "token.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
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
  std::ifstream in{path};
  if (!in)
    throw usage_error("no cluster token at " + path
                      + ": pass --token-file with the file that `lumen start "
                        "--head` wrote (or set LUMEN_TOKEN_FILE)");
  std::string token;
  std::getline(in, token);
  if (token.empty())
    throw usage_error("the token file " + path + " is empty");
  return token;
}

std::string load_or_create_token(const std::string& path) {
  if (std::ifstream{path})
    return read_token(path);
  auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0)
    ::mkdir(path.substr(0, slash).c_str(), 0700);
  std::random_device rd;
  std::ostringstream hex;
  for (int i = 0; i < 8; ++i)
    hex << std::hex << rd();
  auto token = hex.str();
  auto old_mask = ::umask(077);
  std::ofstream out{path};
  ::umask(old_mask);
  if (!out)
    throw usage_error("cannot write the token file " + path
                      + "; pass --token-file with a writable path");
  out << token << "\n";
  out.close();
  ::chmod(path.c_str(), 0600);
  return token;
}

} // namespace lumen::detail
