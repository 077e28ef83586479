#define BOOST_TEST_MODULE object_ref
#include <boost/test/unit_test.hpp>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fixture.hpp"

namespace {

gate* held = nullptr;

int held_value(int x) {
  held->wait();
  return x;
}
LUMEN_REMOTE(held_value);

int identity(int x) {
  return x;
}
LUMEN_REMOTE(identity);

void nothing() {}
LUMEN_REMOTE(nothing);

int twice(int x) {
  return 2 * x;
}
LUMEN_REMOTE(twice);

// Refs as values: in a list (left to the callee) and as a result.
int sum_of(std::vector<lumen::ObjectRef<int>> refs) {
  int total = 0;
  for (auto& r : refs)
    total += lumen::get(r);
  return total;
}
LUMEN_REMOTE(sum_of);

size_t count_of(const std::vector<lumen::ObjectRef<int>>& refs) {
  return refs.size();
}
LUMEN_REMOTE(count_of);

lumen::ObjectRef<int> twice_later(int x) {
  return lumen::task(twice).remote(x);
}
LUMEN_REMOTE(twice_later);

} // namespace

BOOST_TEST_GLOBAL_FIXTURE(runtime_fixture);

BOOST_AUTO_TEST_SUITE(object_ref)

BOOST_AUTO_TEST_CASE(put_then_get_returns_the_value) {
  auto r = lumen::put(std::string{"hello"});
  BOOST_TEST(r.valid());
  BOOST_TEST(r.ready());
  BOOST_TEST(lumen::get(r) == "hello");
}

BOOST_AUTO_TEST_CASE(put_values_are_shared_not_copied) {
  auto r = lumen::put(std::vector<float>(1000, 2.0f));
  auto copy = r;
  BOOST_TEST(copy == r);
  BOOST_TEST(&r.state()->value() == &copy.state()->value());
}

BOOST_AUTO_TEST_CASE(get_on_an_empty_ref_throws_a_usage_error) {
  lumen::ObjectRef<int> empty;
  BOOST_TEST(!empty.valid());
  BOOST_CHECK_EXCEPTION(
    lumen::get(empty), lumen::usage_error, [](const lumen::usage_error& e) {
      return std::string{e.what()}.find("empty") != std::string::npos;
    });
  std::vector<lumen::ObjectRef<int>> refs{lumen::put(1), empty};
  BOOST_CHECK_THROW(lumen::get(refs), lumen::usage_error);
  BOOST_CHECK_THROW(lumen::wait(refs), lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(get_with_timeout_throws_get_timeout_while_pending) {
  gate g;
  held = &g;
  auto r = lumen::task(held_value).remote(7);
  BOOST_CHECK_EXCEPTION(lumen::get(r, std::chrono::milliseconds(20)),
                        lumen::get_timeout, [&](const lumen::get_timeout& e) {
                          return std::string{e.what()}.find(
                                   std::to_string(r.id())) != std::string::npos;
                        });
  BOOST_TEST(!r.ready());
  g.open();
  BOOST_TEST(lumen::get(r, deadline) == 7);
}

BOOST_AUTO_TEST_CASE(get_of_a_list_keeps_the_input_order) {
  std::vector<lumen::ObjectRef<int>> refs;
  for (int i = 0; i < 100; ++i)
    refs.push_back(lumen::task(identity).remote(i));
  auto values = lumen::get(refs);
  BOOST_REQUIRE_EQUAL(values.size(), 100u);
  for (int i = 0; i < 100; ++i)
    BOOST_TEST(values[i] == i);
}

BOOST_AUTO_TEST_CASE(get_of_a_list_times_out_on_one_pending_ref) {
  gate g;
  held = &g;
  std::vector<lumen::ObjectRef<int>> refs{lumen::put(1),
                                          lumen::task(held_value).remote(2)};
  BOOST_CHECK_THROW(lumen::get(refs, std::chrono::milliseconds(20)),
                    lumen::get_timeout);
  g.open();
  BOOST_TEST(lumen::get(refs, deadline) == (std::vector<int>{1, 2}));
}

BOOST_AUTO_TEST_CASE(a_promise_fulfils_its_ref_from_any_thread_once) {
  lumen::promise<int> p;
  auto r = p.ref();
  BOOST_TEST(!r.ready());
  std::thread t{[&] { p.set_value(7); }};
  BOOST_TEST(lumen::get(r, std::chrono::seconds(10)) == 7);
  t.join();
  p.set_value(8); // a second answer changes nothing
  BOOST_TEST(lumen::get(r) == 7);
  lumen::promise<void> done;
  auto d = done.ref();
  done.set_error(std::make_exception_ptr(std::runtime_error("it broke")));
  BOOST_CHECK_EXCEPTION(lumen::get(d), std::runtime_error,
                        [](const std::runtime_error& e) {
                          return std::string{e.what()} == "it broke";
                        });
}

BOOST_AUTO_TEST_CASE(a_promise_dropped_unfulfilled_fails_its_ref) {
  lumen::ObjectRef<std::string> r;
  {
    lumen::promise<std::string> p;
    r = p.ref();
    lumen::promise<std::string> moved = std::move(p);
  }
  BOOST_CHECK_EXCEPTION(lumen::get(r, std::chrono::seconds(10)), lumen::error,
                        [](const lumen::error& e) {
                          return std::string{e.what()}.find(
                                   "destroyed before it was fulfilled") !=
                                 std::string::npos;
                        });
  // A promise's ref is an argument like any other.
  lumen::promise<int> p;
  auto doubled = lumen::task(twice).remote(p.ref());
  p.set_value(21);
  BOOST_TEST(lumen::get(doubled, std::chrono::seconds(10)) == 42);
}

BOOST_AUTO_TEST_CASE(void_results_can_be_awaited) {
  auto r = lumen::task(nothing).remote();
  lumen::get(r);
  BOOST_TEST(r.ready());
  std::vector<lumen::ObjectRef<void>> refs{lumen::task(nothing).remote(),
                                           lumen::task(nothing).remote()};
  lumen::get(refs);
  for (auto& x : refs)
    BOOST_TEST(x.ready());
}

BOOST_AUTO_TEST_CASE(wait_returns_ready_and_pending_in_input_order) {
  gate g;
  held = &g;
  std::vector<lumen::ObjectRef<int>> refs{
    lumen::task(held_value).remote(0), lumen::put(1),
    lumen::task(held_value).remote(2), lumen::put(3)};
  auto [ready, pending] = lumen::wait(refs, 2, deadline);
  BOOST_REQUIRE_EQUAL(ready.size(), 2u);
  BOOST_TEST(ready[0] == refs[1]);
  BOOST_TEST(ready[1] == refs[3]);
  BOOST_REQUIRE_EQUAL(pending.size(), 2u);
  BOOST_TEST(pending[0] == refs[0]);
  BOOST_TEST(pending[1] == refs[2]);
  g.open();
  auto all = lumen::wait(refs, 4, deadline);
  BOOST_TEST(all.ready.size() == 4u);
  BOOST_TEST(all.pending.empty());
}

BOOST_AUTO_TEST_CASE(wait_returns_at_most_num_returns_ready_refs) {
  std::vector<lumen::ObjectRef<int>> refs{lumen::put(1), lumen::put(2),
                                          lumen::put(3)};
  auto res = lumen::wait(refs, 1);
  BOOST_REQUIRE_EQUAL(res.ready.size(), 1u);
  BOOST_TEST(res.ready[0] == refs[0]);
  BOOST_TEST(res.pending.size() == 2u);
}

BOOST_AUTO_TEST_CASE(wait_returns_partial_results_at_the_timeout) {
  gate g;
  held = &g;
  std::vector<lumen::ObjectRef<int>> refs{lumen::task(held_value).remote(0),
                                          lumen::put(1)};
  auto res = lumen::wait(refs, 2, std::chrono::milliseconds(20));
  BOOST_TEST(res.ready.size() == 1u);
  BOOST_TEST(res.pending.size() == 1u);
  BOOST_TEST(res.pending[0] == refs[0]);
  g.open();
  lumen::get(refs[0], deadline);
}

BOOST_AUTO_TEST_CASE(wait_wakes_up_when_a_pending_ref_becomes_ready) {
  gate g;
  held = &g;
  std::vector<lumen::ObjectRef<int>> refs{lumen::task(held_value).remote(5)};
  auto waiter = std::async(std::launch::async,
                           [&] { return lumen::wait(refs, 1, deadline); });
  // The waiter is parked by now (or soon): opening the gate must wake it.
  BOOST_TEST((waiter.wait_for(std::chrono::milliseconds(20)) ==
              std::future_status::timeout));
  g.open();
  auto res = waiter.get();
  BOOST_TEST(res.ready.size() == 1u);
}

BOOST_AUTO_TEST_CASE(wait_with_num_returns_above_the_list_size_is_an_error) {
  std::vector<lumen::ObjectRef<int>> refs{lumen::put(1)};
  BOOST_CHECK_EXCEPTION(
    lumen::wait(refs, 2), lumen::usage_error, [](const lumen::usage_error& e) {
      return std::string{e.what()}.find("num_returns") != std::string::npos;
    });
}

BOOST_AUTO_TEST_CASE(a_list_of_refs_is_an_argument_like_any_value) {
  std::vector<lumen::ObjectRef<int>> refs;
  for (int i = 1; i <= 4; ++i)
    refs.push_back(lumen::task(twice).remote(i));
  BOOST_TEST(lumen::get(lumen::task(sum_of).remote(refs)) == 20);
}

BOOST_AUTO_TEST_CASE(refs_inside_a_list_are_not_waited_for) {
  lumen::promise<int> never;
  std::vector<lumen::ObjectRef<int>> refs{never.ref(), lumen::put(1)};
  BOOST_TEST(lumen::get(lumen::task(count_of).remote(refs),
                        std::chrono::seconds(10)) == 2u);
}

BOOST_AUTO_TEST_CASE(a_task_can_return_a_ref) {
  lumen::ObjectRef<lumen::ObjectRef<int>> outer =
    lumen::task(twice_later).remote(21);
  BOOST_TEST(lumen::get(lumen::get(outer)) == 42);
}

BOOST_AUTO_TEST_CASE(outside_a_cluster_no_ref_is_held_or_borrowed) {
  auto counts = lumen::ref_counts();
  BOOST_TEST(counts.held == 0u);
  BOOST_TEST(counts.borrowed == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
