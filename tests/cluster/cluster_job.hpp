#pragma once

// The remote functions and actors of the cluster tests (cluster_job.cpp).

#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

std::string where();
int add(int x, int y);
double sum(const std::vector<float>& xs);
int fails(int x);
int busy(int ms);
std::string busy_on(const std::string& victim);
double relay(const std::string& to, int n);

class Counter {
public:
  explicit Counter(int start);
  int add(int d);
  std::string node() const;
  int nap(int ms);
  int fail();

private:
  int n_;
};

// Typed CAF actors, registered by name with LUMEN_TYPED_ACTOR.
using add_atom = caf::atom_constant<caf::atom("add")>;
using ask_atom = caf::atom_constant<caf::atom("ask")>;

using calculator =
  caf::typed_actor<caf::replies_to<add_atom, int32_t, int32_t>::with<int32_t>>;

// Never answers: its requests stay open until it or its node is gone.
using silent_actor = caf::typed_actor<caf::replies_to<ask_atom>::with<int32_t>>;
