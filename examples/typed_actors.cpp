// Typed CAF actors behind Lumen futures.
//
// Teaches: a typed CAF actor (its interface declared once as a typed_actor
// alias) spawned in Lumen's actor system, and requests to it that return
// lumen::ObjectRef, so that lumen::get / lumen::wait stand in for ray.get on
// CAF actors too. The ML actors of lumen::actors are built this way.
//
// Run:   ./build/examples/typed_actors
// Prints "7 / 2 = 3", the error for a division by zero, then
// "typed_actors: all steps ok".

#include <iostream>

#include <caf/all.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/lumen.hpp>

// [typed-actor]
using div_atom = caf::atom_constant<caf::atom("div")>;

// The interface, declared once: divide two numbers, or fail.
using divider =
  caf::typed_actor<caf::replies_to<div_atom, int32_t, int32_t>::with<int32_t>>;

divider::behavior_type divider_impl() {
  return {
    [](div_atom, int32_t x, int32_t y) -> caf::result<int32_t> {
      if (y == 0)
        return caf::make_error(caf::sec::invalid_argument, "division by zero");
      return x / y;
    },
  };
}
// [/typed-actor]

int main(int argc, char** argv) {
  lumen::init(argc, argv);
  // [typed-call]
  auto d = lumen::spawn(divider_impl); // ended by lumen::shutdown()
  lumen::ObjectRef<int32_t> q = lumen::call(d, div_atom::value, 7, 2);
  std::cout << "7 / 2 = " << lumen::get(q) << "\n";
  try {
    lumen::get(lumen::call(d, div_atom::value, 1, 0));
  } catch (const lumen::task_error& e) { // error responses arrive as errors
    std::cout << "caught: " << e.what() << "\n";
  }
  // [/typed-call]
  lumen::shutdown();
  std::cout << "typed_actors: all steps ok\n";
}
