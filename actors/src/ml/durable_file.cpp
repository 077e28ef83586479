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

namespace {

/// Writes `n` bytes to `path`, appended or in place of what it held,
/// and flushes them to the disk if `sync`. Throws `data_error` naming
/// the path, how far it got and the system's reason; a file written anew
/// that could not be finished is removed.
void write_file(const std::string& path, const char* data, size_t n,
                bool append, bool sync) {
  int fd = ::open(
    path.c_str(),
    O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd < 0)
    throw data_error("cannot write " + path + ": " + system_reason(),
                     errc::write_failed);
  size_t done = 0;
  bool ok = true;
  while (ok && done < n) {
    auto k = ::write(fd, data + done, n - done);
    if (k < 0 && errno == EINTR)
      continue;
    ok = k > 0;
    if (k == 0)
      errno = ENOSPC; // a write that takes nothing: the disk is full
    done += ok ? size_t(k) : 0;
  }
  // A full disk may show only here, when the data reach it.
  ok = ok && (!sync || ::fsync(fd) == 0);
  auto why = ok ? std::string{} : system_reason();
  if (::close(fd) != 0 && ok) {
    ok = false;
    why = system_reason();
  }
  if (ok)
    return;
  if (!append)
    ::unlink(path.c_str());
  throw data_error(std::string{append ? "cannot append to " : "cannot write "} +
                     path + " (" + std::to_string(done) + " of " +
                     std::to_string(n) + " bytes written): " + why,
                   errc::write_failed);
}

} // namespace

void write_synced(const std::string& path, const std::vector<char>& bytes) {
  write_file(path, bytes.data(), bytes.size(), false, true);
}

void replace_synced(const std::string& path, const std::vector<char>& bytes) {
  auto tmp = path + ".tmp-" + std::to_string(::getpid());
  try {
    write_synced(tmp, bytes);
    rename_synced(tmp, path);
  } catch (const data_error&) {
    std::remove(tmp.c_str());
    throw;
  }
}

void append_synced(const std::string& path, const std::string& text,
                   bool sync) {
  write_file(path, text.data(), text.size(), true, sync);
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
