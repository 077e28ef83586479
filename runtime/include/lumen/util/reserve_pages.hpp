#pragma once

// The pages of a shared-memory file, taken before they are first written:
// there, running out of /dev/shm is a return value; taken on first touch,
// it would be a SIGBUS in whichever process touched them.

#include <fcntl.h>

#include <cstdint>

namespace lumen::util {

/// Takes the pages of `fd` from `base + reserved` to `base + end` and
/// moves `reserved` to `end`, unless it is there already. Returns false,
/// `reserved` unmoved, where the system has no pages left.
inline bool reserve_pages(int fd, uint64_t base, uint64_t& reserved,
                          uint64_t end) noexcept {
  if (end <= reserved)
    return true;
  if (::posix_fallocate(fd, static_cast<off_t>(base + reserved),
                        static_cast<off_t>(end - reserved)) != 0)
    return false;
  reserved = end;
  return true;
}

} // namespace lumen::util
