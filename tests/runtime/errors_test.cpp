#define BOOST_TEST_MODULE errors
#include <boost/test/unit_test.hpp>

// The one table of error codes: every code has a name and the class it is
// thrown as, and an error crosses processes (encoded, decoded) as the same
// class with the same code and message.

#include <set>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "lumen/channel.hpp"
#include "lumen/errors.hpp"

#include "core/error_table.hpp"
#include "transport/protocol.hpp"

using namespace lumen;

namespace {

// Every code, read off the table: the names end where the enum does.
std::vector<errc> all_codes() {
  std::vector<errc> out;
  for (int i = 1; std::string{to_string(static_cast<errc>(i))} != "unknown";
       ++i)
    out.push_back(static_cast<errc>(i));
  return out;
}

template <class F>
void rethrown(const std::exception_ptr& p, F check) {
  try {
    std::rethrow_exception(p);
  } catch (const error& e) {
    check(e);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(every_code_has_a_name_of_its_own) {
  auto codes = all_codes();
  BOOST_TEST(codes.size() == size_t{23});
  std::set<std::string> names;
  for (auto c : codes)
    names.insert(to_string(c));
  BOOST_TEST(names.size() == codes.size());
  BOOST_TEST(std::string{to_string(errc::peer_lost)} == "peer_lost");
  BOOST_TEST(std::string{to_string(static_cast<errc>(200))} == "unknown");
}

BOOST_AUTO_TEST_CASE(each_code_is_thrown_as_its_class) {
  auto cls = [](errc c) {
    std::string name;
    rethrown(detail::make_error(c, "m"),
             [&](const error& e) { name = typeid(e).name(); });
    return name;
  };
  BOOST_TEST(cls(errc::usage) == typeid(usage_error).name());
  BOOST_TEST(cls(errc::name_taken) == typeid(usage_error).name());
  BOOST_TEST(cls(errc::infeasible) == typeid(usage_error).name());
  BOOST_TEST(cls(errc::tls_mismatch) == typeid(error).name());
  BOOST_TEST(cls(errc::actor_died) == typeid(actor_died).name());
  BOOST_TEST(cls(errc::owner_died) == typeid(owner_died).name());
  BOOST_TEST(cls(errc::task_cancelled) == typeid(task_cancelled).name());
  BOOST_TEST(cls(errc::timeout) == typeid(get_timeout).name());
  BOOST_TEST(cls(errc::channel_closed) == typeid(channel_error).name());
  BOOST_TEST(cls(errc::peer_lost) == typeid(error).name());
  BOOST_TEST(cls(errc::bad_file) == typeid(error).name());
}

BOOST_AUTO_TEST_CASE(an_error_crosses_processes_as_its_class_code_and_text) {
  for (auto c : all_codes()) {
    if (c == errc::task_failed)
      continue; // a task_error, below: it carries more than a message
    auto sent = detail::make_error(c, std::string{"what "} + to_string(c));
    auto got = detail::decode_error(detail::encode_error(sent));
    std::string sent_type, got_type, got_what;
    auto got_code = errc::unspecified;
    rethrown(sent, [&](const error& e) { sent_type = typeid(e).name(); });
    rethrown(got, [&](const error& e) {
      got_type = typeid(e).name();
      got_code = e.code();
      got_what = e.what();
    });
    BOOST_TEST(got_type == sent_type, to_string(c));
    BOOST_TEST(to_string(got_code) == to_string(c));
    BOOST_TEST(got_what == std::string{"what "} + to_string(c));
  }
}

BOOST_AUTO_TEST_CASE(a_task_error_keeps_its_function_type_and_node) {
  auto got = detail::decode_error(detail::encode_error(std::make_exception_ptr(
    task_error{"square", "std::invalid_argument", "negative", "node-2"})));
  try {
    std::rethrow_exception(got);
  } catch (const task_error& e) {
    BOOST_TEST(to_string(e.code()) == "task_failed");
    BOOST_TEST(e.function() == "square");
    BOOST_TEST(e.exception_type() == "std::invalid_argument");
    BOOST_TEST(e.node() == "node-2");
  }
}

BOOST_AUTO_TEST_CASE(another_exception_arrives_as_an_error_naming_its_type) {
  auto got = detail::decode_error(detail::encode_error(
    std::make_exception_ptr(std::out_of_range{"index 7"})));
  rethrown(got, [](const error& e) {
    BOOST_TEST(to_string(e.code()) == "unspecified");
    BOOST_TEST(std::string{e.what()} == "std::out_of_range: index 7");
  });
}

BOOST_AUTO_TEST_CASE(a_control_plane_refusal_is_thrown_as_its_codes_class) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  BOOST_CHECK_EXCEPTION(
    detail::throw_control_error(
      sys, detail::make_control_error(errc::infeasible, "no gpu"),
      "cannot place Counter", errc::unreachable),
    usage_error, [](const usage_error& e) {
      return e.code() == errc::infeasible &&
             std::string{e.what()} == "cannot place Counter: no gpu";
    });
}

BOOST_AUTO_TEST_SUITE_END()
