// Checks a trace file the way the ctest entries of traced examples need:
//   trace_check FILE [--processes N] [--span NAME]... [--cross-flows N]
// exits 0 if it is valid trace-event JSON with exactly N processes, every
// span NAME in it, and at least N arrows between processes; else prints
// what is wrong and exits 1.

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "trace_file.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: trace_check FILE [--processes N] [--span NAME]... "
                 "[--cross-flows N]\n";
    return 2;
  }
  auto t = lumen::test::read_trace(argv[1]);
  auto problems = t.problems;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--processes" && t.processes.size() != std::stoul(value))
      problems.push_back(std::to_string(t.processes.size()) +
                         " processes, not " + value);
    else if (flag == "--span" && t.named(value).empty())
      problems.push_back("no span named '" + value + "'");
    else if (flag == "--cross-flows" &&
             t.cross_process_flows < std::stoul(value))
      problems.push_back(std::to_string(t.cross_process_flows) +
                         " arrows between processes, not " + value);
  }
  for (auto& p : problems)
    std::cerr << "trace_check: " << p << "\n";
  if (!problems.empty())
    return 1;
  std::cout << "trace_check: " << argv[1] << " holds " << t.spans.size()
            << " spans of " << t.processes.size() << " processes and "
            << t.flows << " arrows (" << t.cross_process_flows
            << " between processes)\n";
}
