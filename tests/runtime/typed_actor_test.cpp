#define BOOST_TEST_MODULE typed_actor
#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>

#include <lumen/caf_interop.hpp>

#include "fixture.hpp"

namespace {

using add_atom = caf::atom_constant<caf::atom("add")>;
using div_atom = caf::atom_constant<caf::atom("div")>;
using swap_atom = caf::atom_constant<caf::atom("swap")>;

using calculator = caf::typed_actor<
  caf::replies_to<add_atom, int32_t, int32_t>::with<int32_t>,
  caf::replies_to<div_atom, int32_t, int32_t>::with<int32_t>,
  caf::replies_to<swap_atom, int32_t, int32_t>::with<int32_t, int32_t>,
  caf::reacts_to<caf::reset_atom>>;

calculator::behavior_type calculator_impl(calculator::pointer self) {
  return {
    [](add_atom, int32_t x, int32_t y) -> int32_t { return x + y; },
    [](div_atom, int32_t x, int32_t y) -> caf::result<int32_t> {
      if (y == 0)
        return caf::make_error(caf::sec::invalid_argument, "division by zero");
      return x / y;
    },
    [](swap_atom, int32_t x, int32_t y) -> caf::result<int32_t, int32_t> {
      return {y, x};
    },
    [self](caf::reset_atom) { self->quit(); },
  };
}

} // namespace

BOOST_TEST_GLOBAL_FIXTURE(runtime_fixture);

BOOST_AUTO_TEST_SUITE(typed_actor)

BOOST_AUTO_TEST_CASE(call_returns_an_object_ref_to_the_response) {
  auto calc = lumen::spawn(calculator_impl);
  lumen::ObjectRef<int32_t> r = lumen::call(calc, add_atom::value, 2, 3);
  BOOST_TEST(lumen::get(r, deadline) == 5);
}

BOOST_AUTO_TEST_CASE(multi_value_responses_become_tuples) {
  auto calc = lumen::spawn(calculator_impl);
  auto r = lumen::call(calc, swap_atom::value, 1, 2);
  BOOST_CHECK((lumen::get(r, deadline) == std::tuple<int32_t, int32_t>{2, 1}));
}

BOOST_AUTO_TEST_CASE(refs_from_typed_actors_mix_with_lumen_wait) {
  auto calc = lumen::spawn(calculator_impl);
  std::vector<lumen::ObjectRef<int32_t>> refs;
  for (int32_t i = 0; i < 100; ++i)
    refs.push_back(lumen::call(calc, add_atom::value, i, i));
  auto res = lumen::wait(refs, refs.size(), deadline);
  BOOST_TEST(res.ready.size() == 100u);
  auto values = lumen::get(refs);
  for (int32_t i = 0; i < 100; ++i)
    BOOST_TEST_REQUIRE(values[i] == 2 * i);
}

BOOST_AUTO_TEST_CASE(an_error_response_becomes_a_task_error) {
  auto calc = lumen::spawn(calculator_impl);
  BOOST_CHECK_EXCEPTION(
    lumen::get(lumen::call(calc, div_atom::value, 1, 0), deadline),
    lumen::task_error, [](const lumen::task_error& e) {
      return e.message().find("division by zero") != std::string::npos;
    });
}

BOOST_AUTO_TEST_CASE(an_error_response_keeps_the_actors_error_code) {
  auto calc = lumen::spawn(calculator_impl);
  try {
    lumen::get(lumen::call(calc, div_atom::value, 1, 0), deadline);
    BOOST_FAIL("get did not throw");
  } catch (const lumen::typed_actor_error& e) {
    BOOST_TEST((e.cause() == caf::sec::invalid_argument));
    BOOST_TEST((e.cause().category() == caf::atom("system")));
  }
}

BOOST_AUTO_TEST_CASE(a_call_to_a_dead_typed_actor_raises_actor_died) {
  auto calc = lumen::spawn(calculator_impl);
  auto gone = lumen::call(calc, caf::reset_atom::value);
  lumen::get(gone, deadline);
  BOOST_CHECK_THROW(
    lumen::get(lumen::call(calc, add_atom::value, 1, 1), deadline),
    lumen::actor_died);
}

BOOST_AUTO_TEST_SUITE_END()
