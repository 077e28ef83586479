// What the module built from job.cpp registers, declared once for the
// driver that names it and the library that defines it.
#pragma once

#include <string>

/// A remote function: "X squared is Y on NODE".
std::string square_on_node(int x);

/// An actor class: a running total, hosted by whichever node builds it.
class Tally {
public:
  int add(int x);
  std::string node() const;

private:
  int total_ = 0;
};
