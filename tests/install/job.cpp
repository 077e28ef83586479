// The code `lumen start --code-path libjob.so` loads into a head or node
// (built by CMakeLists.txt against lumen::code_path), and that driver.cpp
// compiles in, so that both sides know the same names.
#include "job.hpp"

#include <lumen/lumen.hpp>

// [job-registrations]
std::string square_on_node(int x) {
  return std::to_string(x) + " squared is " + std::to_string(x * x) + " on " +
         lumen::this_node_id();
}
LUMEN_REMOTE(square_on_node);

int Tally::add(int x) {
  return total_ += x;
}

std::string Tally::node() const {
  return lumen::this_node_id();
}
LUMEN_ACTOR(Tally, &Tally::add, &Tally::node);
// A node builds a Tally that a script creates only with this.
LUMEN_ACTOR_CTOR(Tally());
// [/job-registrations]
