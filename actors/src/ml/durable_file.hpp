#pragma once

// Files that are either whole or absent, even on a full disk or a crash:
// written under a temporary name, flushed to the disk, then renamed over
// the real one. Errors say the system's reason as it is ("No space left on
// device"), with the path.

#include <string>
#include <vector>

namespace lumen::ml::detail {

/// Writes `bytes` to `path` (made or truncated) and flushes them to the
/// disk. Throws `data_error` naming the path and the system's reason; a
/// file it could not finish is removed.
void write_synced(const std::string& path, const std::vector<char>& bytes);

/// Flushes the directory `dir`'s entries (a rename into it) to the disk.
void sync_directory(const std::string& dir);

/// Renames `from` to `to` and flushes the directory that holds `to`.
/// Throws `data_error` naming both and the system's reason.
void rename_synced(const std::string& from, const std::string& to);

/// The system's reason for the last failed call, "No space left on
/// device" with the fix for a full disk.
std::string system_reason();

} // namespace lumen::ml::detail
