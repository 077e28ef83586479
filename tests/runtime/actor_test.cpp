#define BOOST_TEST_MODULE actor
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
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

class Recorder {
public:
  explicit Recorder(std::string prefix)
    : prefix_(std::move(prefix)) {}
  // Returns how many calls ran before this one.
  int record(int x) {
    seen_.push_back(x);
    return static_cast<int>(seen_.size()) - 1;
  }
  void clear() {
    seen_.clear();
  }
  std::vector<int> seen() const {
    return seen_;
  }
  std::string label(const std::string& s) const {
    return prefix_ + s;
  }
  int fail(int x) {
    throw std::out_of_range("no slot " + std::to_string(x));
  }
  std::string whoami() const {
    return lumen::current_actor_id();
  }
  std::thread::id thread() const {
    return std::this_thread::get_id();
  }
  int not_listed() {
    return 0;
  }

private:
  std::string prefix_;
  std::vector<int> seen_;
};

// Counts how many of its methods run at once.
class Overlap {
public:
  int run(int ms) {
    return meter_.pass(ms);
  }
  int most() const {
    return meter_.most;
  }
  std::string whoami() const {
    return lumen::current_actor_id();
  }
  int quit() {
    lumen::exit_actor();
    return 0;
  }

private:
  overlap_meter meter_;
};

int most_at_once(const lumen::ActorHandle<Overlap>& a, int calls) {
  std::vector<lumen::ObjectRef<int>> refs;
  for (int i = 0; i < calls; ++i)
    refs.push_back(a.call(&Overlap::run, 40));
  lumen::get(refs, deadline);
  return lumen::get(a.call(&Overlap::most), deadline);
}

} // namespace

LUMEN_ACTOR(Overlap, &Overlap::run, &Overlap::most, &Overlap::whoami,
            &Overlap::quit);

LUMEN_ACTOR(Recorder, &Recorder::record, &Recorder::clear, &Recorder::seen,
            &Recorder::label, &Recorder::fail, &Recorder::whoami);

namespace {

// An actor handed to a task, as Ray passes actor handles around.
int record_twice(lumen::ActorHandle<Recorder> r, int x) {
  lumen::get(r.call(&Recorder::record, x));
  return lumen::get(r.call(&Recorder::record, x));
}
LUMEN_REMOTE(record_twice);

// Handles kept in a list, as an actor pool does.
std::vector<std::string>
labels(std::vector<lumen::ActorHandle<Recorder>> recorders) {
  std::vector<std::string> out;
  for (auto& r : recorders)
    out.push_back(lumen::get(r.call(&Recorder::label, std::string{"x"})));
  return out;
}
LUMEN_REMOTE(labels);

} // namespace

BOOST_TEST_GLOBAL_FIXTURE(runtime_fixture);

BOOST_AUTO_TEST_SUITE(actor)

BOOST_AUTO_TEST_CASE(calls_return_refs_to_method_results) {
  auto a = lumen::actor<Recorder>("p:").remote();
  BOOST_TEST(lumen::get(a.call(&Recorder::label, "x")) == "p:x");
  BOOST_TEST(lumen::get(a.call(&Recorder::record, 5)) == 0);
  BOOST_TEST(lumen::get(a.call(&Recorder::seen)) == (std::vector<int>{5}));
}

BOOST_AUTO_TEST_CASE(an_actor_knows_the_id_its_handles_show) {
  auto a = lumen::actor<Recorder>("").remote();
  auto b = lumen::actor<Recorder>("").with_name("recorder-b").remote();
  BOOST_TEST(!a.id().empty());
  BOOST_TEST(lumen::get(a.call(&Recorder::whoami)) == a.id());
  BOOST_TEST(lumen::get(b.call(&Recorder::whoami)) == b.id());
  BOOST_TEST(a.id() != b.id());
  BOOST_TEST(lumen::get_actor<Recorder>("recorder-b")->id() == b.id());
  BOOST_TEST(lumen::current_actor_id().empty()); // no actor runs here
  lumen::kill(b);
}

BOOST_AUTO_TEST_CASE(void_methods_return_an_object_ref_of_void) {
  auto a = lumen::actor<Recorder>("").remote();
  a.call(&Recorder::record, 1);
  lumen::ObjectRef<void> cleared = a.call(&Recorder::clear);
  lumen::get(cleared);
  BOOST_TEST(lumen::get(a.call(&Recorder::seen)).empty());
}

BOOST_AUTO_TEST_CASE(one_callers_calls_run_in_submission_order) {
  auto a = lumen::actor<Recorder>("").remote();
  constexpr int n = 10000;
  std::vector<lumen::ObjectRef<int>> refs;
  refs.reserve(n);
  for (int i = 0; i < n; ++i)
    refs.push_back(a.call(&Recorder::record, i));
  auto positions = lumen::get(refs, deadline);
  for (int i = 0; i < n; ++i)
    BOOST_TEST_REQUIRE(positions[i] == i);
  auto seen = lumen::get(a.call(&Recorder::seen));
  for (int i = 0; i < n; ++i)
    BOOST_TEST_REQUIRE(seen[i] == i);
}

BOOST_AUTO_TEST_CASE(a_call_waiting_for_a_ref_holds_back_later_calls) {
  gate g;
  held = &g;
  auto a = lumen::actor<Recorder>("").remote();
  auto slow = lumen::task(held_value).remote(1);
  auto first = a.call(&Recorder::record, 0);
  auto second = a.call(&Recorder::record, slow); // waits for the task
  auto third = a.call(&Recorder::record, 2);
  BOOST_TEST(lumen::get(first, deadline) == 0);
  BOOST_TEST(!lumen::wait(std::vector{third}, 1, std::chrono::milliseconds(20))
                .pending.empty());
  g.open();
  BOOST_TEST(lumen::get(second, deadline) == 1);
  BOOST_TEST(lumen::get(third, deadline) == 2);
  BOOST_TEST(lumen::get(a.call(&Recorder::seen)) ==
             (std::vector<int>{0, 1, 2}));
}

BOOST_AUTO_TEST_CASE(a_throwing_method_fails_its_call_and_the_actor_lives_on) {
  auto a = lumen::actor<Recorder>("").remote();
  try {
    lumen::get(a.call(&Recorder::fail, 3));
    BOOST_FAIL("get did not throw");
  } catch (const lumen::task_error& e) {
    BOOST_TEST(e.function() == "Recorder::fail");
    BOOST_TEST(e.exception_type() == "std::out_of_range");
    BOOST_TEST(e.message() == "no slot 3");
  }
  BOOST_TEST(lumen::get(a.call(&Recorder::record, 1)) == 0);
  BOOST_TEST(a.alive());
}

BOOST_AUTO_TEST_CASE(an_unlisted_method_is_a_usage_error_naming_the_fix) {
  auto a = lumen::actor<Recorder>("").remote();
  BOOST_CHECK_EXCEPTION(a.call(&Recorder::not_listed), lumen::usage_error,
                        [](const lumen::usage_error& e) {
                          return std::string{e.what()}.find("LUMEN_ACTOR") !=
                                 std::string::npos;
                        });
}

BOOST_AUTO_TEST_CASE(an_empty_handle_is_a_usage_error) {
  lumen::ActorHandle<Recorder> empty;
  BOOST_CHECK_THROW(empty.call(&Recorder::record, 1), lumen::usage_error);
  BOOST_CHECK_THROW(lumen::kill(empty), lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(several_callers_each_keep_their_own_order) {
  auto a = lumen::actor<Recorder>("").remote();
  constexpr int callers = 4;
  constexpr int per_caller = 2000;
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c)
    threads.emplace_back([&, c] {
      std::vector<lumen::ObjectRef<int>> refs;
      for (int i = 0; i < per_caller; ++i)
        refs.push_back(a.call(&Recorder::record, c * per_caller + i));
      lumen::get(refs, deadline);
    });
  for (auto& t : threads)
    t.join();
  auto seen = lumen::get(a.call(&Recorder::seen));
  BOOST_REQUIRE_EQUAL(seen.size(), size_t{callers * per_caller});
  std::vector<int> last(callers, -1);
  for (auto x : seen) {
    int c = x / per_caller;
    BOOST_TEST_REQUIRE(x > last[c]);
    last[c] = x;
  }
}

BOOST_AUTO_TEST_CASE(a_task_calls_an_actor_whose_handle_it_was_given) {
  auto r = lumen::actor<Recorder>("r").remote();
  BOOST_TEST(lumen::get(lumen::task(record_twice).remote(r, 7)) == 1);
  BOOST_TEST((lumen::get(r.call(&Recorder::seen)) == std::vector<int>{7, 7}));
}

BOOST_AUTO_TEST_CASE(handles_in_a_list_are_an_argument_like_any_value) {
  std::vector<lumen::ActorHandle<Recorder>> rs{
    lumen::actor<Recorder>("a-").remote(),
    lumen::actor<Recorder>("b-").remote()};
  BOOST_TEST((lumen::get(lumen::task(labels).remote(rs)) ==
              std::vector<std::string>{"a-x", "b-x"}));
}

BOOST_AUTO_TEST_CASE(max_concurrency_runs_that_many_methods_at_once) {
  auto threaded = lumen::actor<Overlap>().with_max_concurrency(3).remote();
  BOOST_TEST(most_at_once(threaded, 9) == 3);
  BOOST_TEST(lumen::get(threaded.call(&Overlap::whoami), deadline) ==
             threaded.id());
  auto plain = lumen::actor<Overlap>().remote();
  BOOST_TEST(most_at_once(plain, 4) == 1);
  BOOST_CHECK_THROW(lumen::actor<Overlap>().with_max_concurrency(0),
                    lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(a_threaded_actor_restarts_and_finishes_its_calls) {
  auto a = lumen::actor<Overlap>()
             .with_max_concurrency(2)
             .with_max_restarts(1)
             .remote();
  BOOST_CHECK_THROW(lumen::get(a.call(&Overlap::quit), deadline),
                    lumen::actor_died);
  BOOST_TEST(lumen::get(a.call(&Overlap::run, 1), deadline) == 1);
  BOOST_TEST(a.num_restarts() == 1);
  // Calls queued when the last handle goes still run.
  std::vector<lumen::ObjectRef<int>> refs;
  {
    auto doomed = lumen::actor<Overlap>().with_max_concurrency(2).remote();
    for (int i = 0; i < 6; ++i)
      refs.push_back(doomed.call(&Overlap::run, 10));
  }
  for (auto& r : refs)
    BOOST_TEST(lumen::get(r, deadline) >= 1);
}

BOOST_AUTO_TEST_CASE(a_detached_actor_needs_a_name) {
  BOOST_CHECK_THROW(
    lumen::actor<Overlap>().with_lifetime(lumen::lifetime::detached).remote(),
    lumen::usage_error);
  auto kept = lumen::actor<Overlap>()
                .with_name("kept")
                .with_lifetime(lumen::lifetime::detached)
                .remote();
  BOOST_TEST(lumen::get(kept.call(&Overlap::run, 1), deadline) == 1);
  BOOST_TEST(lumen::get_actor<Overlap>("kept").has_value());
  lumen::kill(kept);
}

BOOST_AUTO_TEST_SUITE_END()
