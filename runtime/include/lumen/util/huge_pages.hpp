#pragma once

// Large blocks on transparent huge pages. Where the system leaves huge
// pages to the programs that ask for them (THP "madvise", as on this
// project's machines), glibc's allocator maps each large block (32 MiB and
// more, always) afresh on 4 KiB pages: a tensor of 64 MiB costs 16,384
// page faults each time one is made (190 ms in a virtual machine here, 6
// ms on huge pages). glibc asks for huge pages when started with
// GLIBC_TUNABLES=glibc.malloc.hugetlb=1, which only works from the start
// of a process. Node processes Lumen starts get it: `lumen::cli_main`
// asks for it, so a program that serves as a node calls `cli_main` before
// it starts any thread; another program gets it by calling
// `use_huge_pages` first thing in `main` (the benchmarks do).

#include <string>

namespace lumen::util {

/// Starts this program again (its own arguments, the same process), once,
/// with glibc's large blocks on huge pages; returns at once where they are
/// already, where THP is "always" or "never", where the allocator is not
/// glibc's (a sanitizer's), with LUMEN_HUGE_PAGES=0, or if starting again
/// fails. Call it before any thread exists: nothing done
/// before it is undone.
void use_huge_pages();

/// The environment entry (`GLIBC_TUNABLES=...`) that gives a process
/// started from this one huge pages, the process's own setting kept; empty
/// where none is needed (see `use_huge_pages`).
std::string huge_pages_environment();

} // namespace lumen::util
