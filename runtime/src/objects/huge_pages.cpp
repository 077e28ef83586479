#include "lumen/util/huge_pages.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace lumen::util {

namespace {

constexpr const char* tunable = "glibc.malloc.hugetlb=1";

/// Whether the system gives huge pages only to memory that asks for them.
bool only_when_asked() {
  std::ifstream f{"/sys/kernel/mm/transparent_hugepage/enabled"};
  std::string line;
  std::getline(f, line);
  return line.find("[madvise]") != std::string::npos;
}

/// Whether glibc's allocator serves this process: a sanitizer's (or a
/// preloaded one) ignores glibc's tunables, and starting again would only
/// pay the start twice (0.9 s for a program under AddressSanitizer here).
bool glibc_allocates() {
  void* libc = ::dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (libc == nullptr)
    return false;
  bool same = ::dlsym(RTLD_DEFAULT, "malloc") == ::dlsym(libc, "malloc");
  ::dlclose(libc);
  return same;
}

} // namespace

std::string huge_pages_environment() {
  const char* off = std::getenv("LUMEN_HUGE_PAGES");
  if ((off != nullptr && std::string{off} == "0") || !only_when_asked() ||
      !glibc_allocates())
    return {};
  const char* now = std::getenv("GLIBC_TUNABLES");
  std::string mine = now != nullptr ? now : "";
  // The process's own choice stands, whatever it is.
  if (mine.find("glibc.malloc.hugetlb") != std::string::npos)
    return {};
  return "GLIBC_TUNABLES=" + (mine.empty() ? mine : mine + ":") + tunable;
}

void use_huge_pages() {
  auto entry = huge_pages_environment();
  if (entry.empty())
    return;
  // The program's own arguments, whatever part of them its caller has.
  std::ifstream cmdline{"/proc/self/cmdline"};
  std::vector<std::string> args;
  for (std::string a; std::getline(cmdline, a, '\0');)
    args.push_back(a);
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  if (args.empty())
    return;
  const char* before = std::getenv("GLIBC_TUNABLES");
  std::string kept = before != nullptr ? before : "";
  if (::setenv("GLIBC_TUNABLES", entry.substr(entry.find('=') + 1).c_str(),
               1) != 0)
    return;
  ::execv("/proc/self/exe", argv.data());
  // Not started again: go on as is, and pass on the setting this process
  // has, not the one it asked for.
  if (before != nullptr)
    ::setenv("GLIBC_TUNABLES", kept.c_str(), 1);
  else
    ::unsetenv("GLIBC_TUNABLES");
}

} // namespace lumen::util
