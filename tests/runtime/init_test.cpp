#define BOOST_TEST_MODULE init
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include <lumen/lumen.hpp>

namespace {

int one() {
  return 1;
}
LUMEN_REMOTE(one);

struct argv_builder {
  explicit argv_builder(std::vector<std::string> args) : args_(std::move(args)) {
    for (auto& a : args_)
      ptrs_.push_back(a.data());
  }
  int argc() const {
    return static_cast<int>(ptrs_.size());
  }
  char** argv() {
    return ptrs_.data();
  }

private:
  std::vector<std::string> args_;
  std::vector<char*> ptrs_;
};

bool mentions(const std::exception& e, const std::string& part) {
  return std::string{e.what()}.find(part) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_SUITE(init)

BOOST_AUTO_TEST_CASE(the_api_before_init_is_a_usage_error) {
  BOOST_TEST(!lumen::is_initialized());
  BOOST_CHECK_EXCEPTION(lumen::task(one).remote(), lumen::usage_error,
                        [](const lumen::usage_error& e) {
                          return mentions(e, "lumen::init");
                        });
}

BOOST_AUTO_TEST_CASE(init_then_shutdown_then_init_again_works) {
  lumen::init();
  BOOST_TEST(lumen::is_initialized());
  BOOST_TEST(lumen::get(lumen::task(one).remote()) == 1);
  lumen::shutdown();
  BOOST_TEST(!lumen::is_initialized());
  lumen::init();
  BOOST_TEST(lumen::get(lumen::task(one).remote()) == 1);
  lumen::shutdown();
  lumen::shutdown(); // a second shutdown is a no-op
}

BOOST_AUTO_TEST_CASE(init_twice_is_a_usage_error) {
  lumen::init();
  BOOST_CHECK_EXCEPTION(lumen::init(), lumen::usage_error,
                        [](const lumen::usage_error& e) {
                          return mentions(e, "twice");
                        });
  lumen::shutdown();
}

BOOST_AUTO_TEST_CASE(known_flags_are_parsed) {
  argv_builder a{{"prog", "--num-cpus=3", "input.txt"}};
  bool help = true;
  auto opts = lumen::parse_init_flags(a.argc(), a.argv(), help);
  BOOST_TEST(opts.num_cpus == 3);
  BOOST_TEST(!help);
  argv_builder b{{"prog", "--num-cpus", "2", "--help"}};
  opts = lumen::parse_init_flags(b.argc(), b.argv(), help);
  BOOST_TEST(opts.num_cpus == 2);
  BOOST_TEST(help);
}

BOOST_AUTO_TEST_CASE(an_unknown_flag_is_named_in_the_error) {
  argv_builder a{{"prog", "--num-cpu=3"}};
  bool help = false;
  BOOST_CHECK_EXCEPTION(lumen::parse_init_flags(a.argc(), a.argv(), help),
                        lumen::usage_error, [](const lumen::usage_error& e) {
                          return mentions(e, "'--num-cpu=3'")
                                 && mentions(e, "--num-cpus=N");
                        });
}

BOOST_AUTO_TEST_CASE(bad_flag_values_are_rejected) {
  bool help = false;
  for (auto bad : {"--num-cpus=0", "--num-cpus=-2", "--num-cpus=two",
                   "--num-cpus=3x"}) {
    argv_builder a{{"prog", bad}};
    BOOST_CHECK_THROW(lumen::parse_init_flags(a.argc(), a.argv(), help),
                      lumen::usage_error);
  }
  argv_builder missing{{"prog", "--num-cpus"}};
  BOOST_CHECK_THROW(
    lumen::parse_init_flags(missing.argc(), missing.argv(), help),
    lumen::usage_error);
}

BOOST_AUTO_TEST_SUITE_END()
