#include "ml/durable_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "lumen/ml/data.hpp"

namespace lumen::ml::detail {

namespace {

std::string parent_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

std::string system_reason() {
  std::string why = std::strerror(errno);
  if (errno == ENOSPC || errno == EDQUOT)
    why += " (free space there, or write somewhere else)";
  return why;
}

void write_synced(const std::string& path, const std::vector<char>& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw data_error("cannot write " + path + ": " + system_reason(),
                     errc::write_failed);
  size_t done = 0;
  bool ok = true;
  while (ok && done < bytes.size()) {
    auto n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    ok = n > 0;
    if (n == 0)
      errno = ENOSPC; // a write that takes nothing: the disk is full
    done += ok ? size_t(n) : 0;
  }
  // A full disk may show only here, when the data reach it.
  ok = ok && ::fsync(fd) == 0;
  auto why = ok ? std::string{} : system_reason();
  if (::close(fd) != 0 && ok) {
    ok = false;
    why = system_reason();
  }
  if (!ok) {
    ::unlink(path.c_str());
    throw data_error("cannot write " + path + " (" + std::to_string(done) +
                       " of " + std::to_string(bytes.size()) +
                       " bytes written): " + why,
                     errc::write_failed);
  }
}

void sync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void rename_synced(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw data_error("cannot put " + to + " in place (renaming " + from +
                       "): " + system_reason(),
                     errc::write_failed);
  sync_directory(parent_of(to));
}

} // namespace lumen::ml::detail
