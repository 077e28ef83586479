#define BOOST_TEST_MODULE kv
#include <boost/test/unit_test.hpp>

// The key-value store outside a cluster: this process's own, with the
// bounds the head keeps too (tests/cluster/placement_test.cpp).

#include <string>
#include <vector>

#include "fixture.hpp"

BOOST_TEST_GLOBAL_FIXTURE(runtime_fixture);

BOOST_AUTO_TEST_SUITE(kv)

BOOST_AUTO_TEST_CASE(values_are_put_got_claimed_and_erased) {
  BOOST_TEST(!lumen::kv::get("job/owner"));
  BOOST_TEST(lumen::kv::put("job/owner", "alice"));
  BOOST_TEST(*lumen::kv::get("job/owner") == "alice");
  BOOST_TEST(!lumen::kv::put("job/owner", "bob", false)); // a claim, lost
  BOOST_TEST(*lumen::kv::get("job/owner") == "alice");
  BOOST_TEST(lumen::kv::put("job/owner", "bob"));
  BOOST_TEST(*lumen::kv::get("job/owner") == "bob");
  BOOST_TEST(lumen::kv::erase("job/owner"));
  BOOST_TEST(!lumen::kv::erase("job/owner"));
  BOOST_TEST(!lumen::kv::get("job/owner"));
  BOOST_TEST(lumen::kv::put("job/empty", ""));
  BOOST_TEST(*lumen::kv::get("job/empty") == "");
  lumen::kv::erase("job/empty");
}

BOOST_AUTO_TEST_CASE(keys_are_listed_by_prefix_in_order) {
  for (auto* k : {"list/b", "list/a", "list/a/1", "lisp", "list"})
    lumen::kv::put(k, "x");
  using keys = std::vector<std::string>;
  BOOST_TEST(lumen::kv::keys("list/") == (keys{"list/a", "list/a/1", "list/b"}),
             boost::test_tools::per_element());
  BOOST_TEST(lumen::kv::keys("lis").size() == 5u);
  BOOST_TEST(lumen::kv::keys("none/").empty());
  std::string wide(300, 'k');
  BOOST_CHECK_THROW(lumen::kv::keys(wide), lumen::usage_error);
  for (auto* k : {"list/b", "list/a", "list/a/1", "lisp", "list"})
    lumen::kv::erase(k);
  BOOST_TEST(lumen::kv::keys("lis").empty());
}

BOOST_AUTO_TEST_CASE(keys_and_values_out_of_bounds_are_refused_by_name) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const lumen::usage_error& e) {
      return std::string{e.what()};
    }
    return std::string{"no error"};
  };
  BOOST_TEST(message([] { lumen::kv::put("", "x"); }).find("1 to 256") !=
             std::string::npos);
  BOOST_TEST(message([] {
               lumen::kv::get(std::string(257, 'k'));
             }).find("a key of 257 bytes") != std::string::npos);
  auto big =
    message([] { lumen::kv::put("big", std::string((1 << 20) + 1, 'x')); });
  BOOST_TEST(big.find("up to 1 MiB") != std::string::npos, big);
  BOOST_TEST(lumen::kv::put("big", std::string(1 << 20, 'x'))); // the bound
  lumen::kv::erase("big");
}

BOOST_AUTO_TEST_CASE(a_full_store_refuses_more_until_keys_are_erased) {
  std::string mib(1 << 20, 'x');
  int stored = 0;
  std::string refusal;
  for (; stored < 70; ++stored) {
    try {
      lumen::kv::put("fill/" + std::to_string(stored), mib);
    } catch (const lumen::usage_error& e) {
      refusal = e.what();
      break;
    }
  }
  BOOST_TEST(stored == 63); // 64 MiB, keys included
  BOOST_TEST(refusal.find("full (64 MiB)") != std::string::npos, refusal);
  lumen::kv::erase("fill/0");
  BOOST_TEST(lumen::kv::put("fill/63", mib));
  for (int i = 1; i <= 63; ++i)
    lumen::kv::erase("fill/" + std::to_string(i));
}

BOOST_AUTO_TEST_SUITE_END()
