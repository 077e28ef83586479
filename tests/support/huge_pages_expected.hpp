#pragma once

// Whether processes Lumen starts should run with glibc's large blocks on
// huge pages (lumen/util/huge_pages.hpp), worked out apart from the code
// under test: where the system leaves huge pages to those who ask (THP
// "madvise"), and glibc's allocator serves the build (AddressSanitizer's
// does not).

#include <fstream>
#include <string>

namespace lumen::test {

struct huge_pages_expected {
  std::string setting; // the THP line, for messages
  bool asked = false;

  huge_pages_expected() {
    std::ifstream thp{"/sys/kernel/mm/transparent_hugepage/enabled"};
    std::getline(thp, setting);
#ifndef __SANITIZE_ADDRESS__
    asked = setting.find("[madvise]") != std::string::npos;
#endif
  }
};

} // namespace lumen::test
