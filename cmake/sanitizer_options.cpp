// Linked into every executable of a sanitizer build, so that a sanitizer
// run needs no environment: any UBSan report ends the process (and fails
// its test) except the CAF-header reports listed in ubsan.supp, and
// LeakSanitizer reports every leak but one of CAF's own.
extern "C" const char* __ubsan_default_options() {
  return "halt_on_error=1:print_stacktrace=1:suppressions=" LUMEN_UBSAN_SUPP;
}

// CAF 0.17's BASP broker and what it holds (its scribes, its endpoint
// tables, node ids) can outlive a short-lived process's actor system as a
// reference cycle: only indirect leaks, every one allocated inside
// libcaf_io, reported now and then when a process that joined a cluster
// exits right after lumen::shutdown. Not Lumen's memory to free.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libcaf_io.so\n";
}
