// Typed CAF actors behind Lumen futures.
//
// Teaches: a typed CAF actor (its interface declared once as a typed_actor
// alias) spawned in Lumen's actor system, and requests to it that return
// lumen::ObjectRef, so that lumen::get / lumen::wait stand in for ray.get on
// CAF actors too; and an actor asking another with lumen::request. The ML
// actors of lumen::actors are built this way.
//
// Run:   ./.build/examples/basics/typed_actors
// Prints "7 / 2 = 3", the error for a division by zero, "mean of 3 and 8
// = 5", then "typed_actors: all steps ok".

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

// [typed-request]
using avg_atom = caf::atom_constant<caf::atom("avg")>;

using averager =
  caf::typed_actor<caf::replies_to<avg_atom, int32_t, int32_t>::with<int32_t>>;

// Asks the divider from inside an actor: lumen::request is self->request,
// but on the data plane when the divider is in another cluster process.
averager::behavior_type averager_impl(averager::pointer self, divider d) {
  return {
    [=](avg_atom, int32_t x, int32_t y) -> caf::result<int32_t> {
      auto rp = self->make_response_promise<int32_t>();
      lumen::request(self, d, caf::infinite, div_atom::value, x + y, 2)
        .then([rp](int32_t mean) mutable { rp.deliver(mean); },
              [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
      return rp;
    },
  };
}
// [/typed-request]

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
  auto a = lumen::spawn(averager_impl, d);
  std::cout << "mean of 3 and 8 = "
            << lumen::get(lumen::call(a, avg_atom::value, 3, 8)) << "\n";
  lumen::shutdown();
  std::cout << "typed_actors: all steps ok\n";
}
