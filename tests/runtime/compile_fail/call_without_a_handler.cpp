// Must NOT compile: a typed actor called with arguments its interface has
// no handler for. The build stops with one error in Lumen's words, and no
// template dump after it.
#include <string>

#include <lumen/caf_interop.hpp>
#include <lumen/lumen.hpp>

using add_atom = caf::atom_constant<caf::atom("add")>;
using counter = caf::typed_actor<caf::replies_to<add_atom, int>::with<int>>;

int main() {
  lumen::init();
  counter c;
  lumen::get(lumen::call(c, add_atom::value, std::string{"seven"}));
}
