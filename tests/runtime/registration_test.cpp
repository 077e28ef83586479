#define BOOST_TEST_MODULE registration
#include <boost/test/unit_test.hpp>

#include <string>

#include <lumen/lumen.hpp>

namespace {

int twice(int x) {
  return 2 * x;
}
// The same function registered twice, as happens when LUMEN_REMOTE sits in a
// header included by two .cpp files.
LUMEN_REMOTE(twice);
LUMEN_REMOTE(twice);

class Dup {
public:
  int f() {
    return 1;
  }
};
LUMEN_ACTOR(Dup, &Dup::f);
LUMEN_ACTOR(Dup, &Dup::f);

} // namespace

BOOST_AUTO_TEST_SUITE(registration)

BOOST_AUTO_TEST_CASE(registering_a_name_twice_makes_init_fail_naming_it) {
  try {
    lumen::init();
    lumen::shutdown();
    BOOST_FAIL("init accepted a duplicate registration");
  } catch (const lumen::usage_error& e) {
    std::string what = e.what();
    BOOST_TEST(what.find("remote function 'twice' is registered twice") !=
               std::string::npos);
    BOOST_TEST(what.find("actor class 'Dup' is registered twice") !=
               std::string::npos);
  }
  BOOST_TEST(!lumen::is_initialized());
}

BOOST_AUTO_TEST_CASE(method_names_are_taken_from_the_macro) {
  auto names = lumen::detail::split_method_names("&A::x, &A::y ,&A::z");
  BOOST_TEST(names == (std::vector<std::string>{"A::x", "A::y", "A::z"}));
}

BOOST_AUTO_TEST_SUITE_END()
