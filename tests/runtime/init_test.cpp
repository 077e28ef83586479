#define BOOST_TEST_MODULE init
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include <lumen/cli.hpp>
#include <lumen/detail/init_flags.hpp>
#include <lumen/lumen.hpp>

namespace {

int one() {
  return 1;
}
LUMEN_REMOTE(one);

struct argv_builder {
  explicit argv_builder(std::vector<std::string> args)
    : args_(std::move(args)) {
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

/// A fresh folder for token files.
std::string temp_dir() {
  char tmpl[] = "/tmp/lumen-init-XXXXXX";
  return ::mkdtemp(tmpl);
}

std::string write_token(const std::string& dir, const std::string& text,
                        mode_t mode) {
  auto path = dir + "/token";
  std::ofstream{path} << text;
  ::chmod(path.c_str(), mode);
  return path;
}

/// What `init` throws for these options: the code and the message.
std::pair<lumen::errc, std::string> init_failure(lumen::init_options opts) {
  try {
    lumen::init(opts);
  } catch (const lumen::error& e) {
    return {e.code(), e.what()};
  }
  lumen::shutdown();
  return {lumen::errc{}, "init did not throw"};
}

} // namespace

BOOST_AUTO_TEST_SUITE(init)

BOOST_AUTO_TEST_CASE(the_api_before_init_is_a_usage_error) {
  BOOST_TEST(!lumen::is_initialized());
  BOOST_CHECK_EXCEPTION(
    lumen::task(one).remote(), lumen::usage_error,
    [](const lumen::usage_error& e) { return mentions(e, "lumen::init"); });
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
  BOOST_CHECK_EXCEPTION(
    lumen::init(), lumen::usage_error,
    [](const lumen::usage_error& e) { return mentions(e, "twice"); });
  lumen::shutdown();
}

BOOST_AUTO_TEST_CASE(known_flags_are_parsed) {
  argv_builder a{{"prog", "--num-cpus=3", "input.txt"}};
  bool help = true;
  auto opts = lumen::detail::parse_init_flags(a.argc(), a.argv(), help);
  BOOST_TEST(opts.num_cpus == 3);
  BOOST_TEST(!help);
  argv_builder b{{"prog", "--num-cpus", "2", "--help"}};
  opts = lumen::detail::parse_init_flags(b.argc(), b.argv(), help);
  BOOST_TEST(opts.num_cpus == 2);
  BOOST_TEST(help);
}

BOOST_AUTO_TEST_CASE(an_unknown_flag_is_named_in_the_error) {
  argv_builder a{{"prog", "--num-cpu=3"}};
  bool help = false;
  BOOST_CHECK_EXCEPTION(
    lumen::detail::parse_init_flags(a.argc(), a.argv(), help),
    lumen::usage_error, [](const lumen::usage_error& e) {
      return mentions(e, "'--num-cpu=3'") && mentions(e, "--num-cpus N");
    });
}

BOOST_AUTO_TEST_CASE(bad_flag_values_are_rejected) {
  bool help = false;
  for (auto bad : {"--num-cpus=0", "--num-cpus=-2", "--num-cpus=two",
                   "--num-cpus=3x", "--local-nodes=65", "--local-nodes=-1"}) {
    argv_builder a{{"prog", bad}};
    BOOST_CHECK_THROW(lumen::detail::parse_init_flags(a.argc(), a.argv(), help),
                      lumen::usage_error);
  }
  argv_builder missing{{"prog", "--num-cpus"}};
  BOOST_CHECK_THROW(
    lumen::detail::parse_init_flags(missing.argc(), missing.argv(), help),
    lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(a_program_with_flags_of_its_own_hands_init_the_rest) {
  auto opts = lumen::parse_init_flags(
    {"--address", "127.0.0.1:7000", "--num-cpus=2", "--tls"});
  BOOST_TEST(opts.address == "127.0.0.1:7000");
  BOOST_TEST(opts.num_cpus == 2);
  BOOST_TEST(opts.tls.enabled);
  for (auto [bad, says] :
       {std::pair{"--epochs=3", "unknown flag '--epochs=3'"},
        std::pair{"input.txt", "unknown argument 'input.txt'"},
        std::pair{"--help", "unknown flag '--help'"},
        std::pair{"--num-cpus=0", "--num-cpus"}}) {
    BOOST_CHECK_EXCEPTION(
      lumen::parse_init_flags({bad}), lumen::usage_error,
      [&](const lumen::usage_error& e) { return mentions(e, says); });
  }
  BOOST_TEST(
    mentions(std::runtime_error{lumen::init_flags_help()}, "--token-file"));
}

BOOST_AUTO_TEST_CASE(a_verb_of_a_library_is_run_with_its_arguments) {
  std::vector<std::string> seen;
  lumen::cli_verb verb{"greet", "says hello", [&](int argc, char** argv) {
                         seen.assign(argv, argv + argc);
                         return 7;
                       }};
  argv_builder a{{"lumen", "greet", "--loud", "world"}};
  BOOST_TEST(lumen::cli_main(a.argc(), a.argv(), {verb}) == 7);
  BOOST_TEST((seen == std::vector<std::string>{"greet", "--loud", "world"}));
  // `lumen --help` lists it; an unknown verb is still a usage error.
  std::ostringstream help;
  auto* was = std::cout.rdbuf(help.rdbuf());
  argv_builder h{{"lumen", "--help"}};
  auto code = lumen::cli_main(h.argc(), h.argv(), {verb});
  std::cout.rdbuf(was);
  BOOST_TEST(code == 0);
  BOOST_TEST(help.str().find("greet") != std::string::npos, help.str());
  BOOST_TEST(help.str().find("says hello") != std::string::npos);
  argv_builder unknown{{"lumen", "greets"}};
  BOOST_TEST(lumen::cli_main(unknown.argc(), unknown.argv(), {verb}) == 2);
}

BOOST_AUTO_TEST_CASE(local_nodes_out_of_range_are_a_usage_error) {
  lumen::init_options opts;
  opts.local_nodes = 65;
  BOOST_CHECK_EXCEPTION(
    lumen::init(opts), lumen::usage_error,
    [](const lumen::usage_error& e) { return mentions(e, "0 to 64"); });
  BOOST_TEST(!lumen::is_initialized());
}

BOOST_AUTO_TEST_CASE(flags_take_a_value_either_way_and_refuse_empty_ones) {
  bool help = false;
  argv_builder a{{"prog", "--address=127.0.0.1:7000", "--token-file", "t"}};
  auto opts = lumen::detail::parse_init_flags(a.argc(), a.argv(), help);
  BOOST_TEST(opts.address == "127.0.0.1:7000");
  BOOST_TEST(opts.token_file == "t");
  for (auto bad : {"--address=", "--token-file=", "--address=garbage"}) {
    argv_builder b{{"prog", bad}};
    BOOST_CHECK_THROW(lumen::detail::parse_init_flags(b.argc(), b.argv(), help),
                      lumen::usage_error);
  }
}

BOOST_AUTO_TEST_CASE(a_token_file_others_can_read_is_refused_like_an_ssh_key) {
  auto path = write_token(temp_dir(), "s3cret\n", 0644);
  auto [code, what] = init_failure({0, "127.0.0.1:1", path, {}});
  BOOST_TEST((code == lumen::errc::bad_token_file));
  BOOST_TEST(what.find("chmod 600 " + path) != std::string::npos, what);
}

BOOST_AUTO_TEST_CASE(a_missing_empty_or_directory_token_file_says_so) {
  auto dir = temp_dir();
  auto missing = init_failure({0, "127.0.0.1:1", dir + "/nope", {}});
  BOOST_TEST((missing.first == lumen::errc::bad_token_file));
  BOOST_TEST(missing.second.find("no cluster token") != std::string::npos);
  auto folder = init_failure({0, "127.0.0.1:1", dir, {}});
  BOOST_TEST((folder.first == lumen::errc::bad_token_file));
  BOOST_TEST(folder.second.find("is a directory") != std::string::npos,
             folder.second);
  auto empty = init_failure({0, "127.0.0.1:1", write_token(dir, "", 0600), {}});
  BOOST_TEST((empty.first == lumen::errc::bad_token_file));
  BOOST_TEST(empty.second.find("is empty") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_unreachable_head_is_a_catchable_error_with_a_code) {
  auto path = write_token(temp_dir(), "s3cret\n", 0600);
  auto [code, what] = init_failure({0, "127.0.0.1:1", path, {}});
  BOOST_TEST((code == lumen::errc::unreachable));
  BOOST_TEST(what.find("the head at 127.0.0.1:1") != std::string::npos, what);
  BOOST_TEST(what.find("system_error") == std::string::npos, what);
  BOOST_TEST(!lumen::is_initialized());
}

BOOST_AUTO_TEST_CASE(tls_settings_that_cannot_work_are_usage_errors) {
  auto path = write_token(temp_dir(), "s3cret\n", 0600);
  ::setenv("LUMEN_TLS", "maybe", 1);
  auto [code, what] = init_failure({0, "127.0.0.1:1", path, {}});
  ::unsetenv("LUMEN_TLS");
  BOOST_TEST((code == lumen::errc::usage));
  BOOST_TEST(what.find("LUMEN_TLS must be 1") != std::string::npos, what);
  lumen::tls_options half;
  half.cert_file = path; // a certificate without its key
  auto [code2, what2] = init_failure({0, "127.0.0.1:1", path, half});
  BOOST_TEST((code2 == lumen::errc::tls_mismatch));
  BOOST_TEST(what2.find("--tls-key") != std::string::npos, what2);
}

BOOST_AUTO_TEST_CASE(a_bad_address_is_a_usage_error) {
  auto [code, what] = init_failure({0, "garbage", "", {}});
  BOOST_TEST((code == lumen::errc::usage));
  BOOST_TEST(what.find("HOST:PORT") != std::string::npos, what);
}

BOOST_AUTO_TEST_SUITE_END()
