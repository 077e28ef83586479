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

/// Puts `bytes` in `path` whole or not at all: written beside it, flushed,
/// then renamed over it. Throws `data_error` naming the path and the
/// system's reason; the file beside it is removed.
void replace_synced(const std::string& path, const std::vector<char>& bytes);

/// Appends `text` to `path` (made if absent) in one write, and flushes it
/// to the disk if `sync`: a killed process leaves what was written, a
/// crash of the machine at most cuts the last line. Throws `data_error`
/// naming the path and the system's reason.
void append_synced(const std::string& path, const std::string& text, bool sync);

/// Flushes the directory `dir`'s entries (a rename into it) to the disk.
void sync_directory(const std::string& dir);

/// Renames `from` to `to` and flushes the directory that holds `to`.
/// Throws `data_error` naming both and the system's reason.
void rename_synced(const std::string& from, const std::string& to);

/// The system's reason for the last failed call, "No space left on
/// device" with the fix for a full disk.
std::string system_reason();

} // namespace lumen::ml::detail
