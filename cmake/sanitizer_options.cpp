// Linked into every executable of a sanitizer build, so that a sanitizer
// run needs no environment: any UBSan report ends the process (and fails
// its test) except the CAF-header reports listed in ubsan.supp.
extern "C" const char* __ubsan_default_options() {
  return "halt_on_error=1:print_stacktrace=1:suppressions=" LUMEN_UBSAN_SUPP;
}
