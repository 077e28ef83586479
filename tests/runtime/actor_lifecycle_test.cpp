#define BOOST_TEST_MODULE actor_lifecycle
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <string>
#include <vector>

#include "fixture.hpp"

namespace {

gate* held = nullptr;
gate* entered = nullptr; // opened by wait_at_gate once it runs, if set

int held_value(int x) {
  held->wait();
  return x;
}
LUMEN_REMOTE(held_value);

// Constructions of accounts opened with this balance; other tests' actors
// construct concurrently, so they use other balances.
constexpr int counted_balance = 4242;
std::atomic<int> constructions{0};

class Account {
public:
  explicit Account(int balance)
    : balance_(balance) {
    if (balance == counted_balance)
      constructions.fetch_add(1);
  }
  int deposit(int x) {
    return balance_ += x;
  }
  int balance() const {
    return balance_;
  }
  int quit() {
    lumen::exit_actor();
  }
  int crash() {
    throw lumen::actor_fatal_error("ledger corrupted");
  }
  int wait_at_gate() {
    if (entered != nullptr)
      entered->open();
    held->wait();
    return balance_;
  }

private:
  int balance_;
};
LUMEN_ACTOR(Account, &Account::deposit, &Account::balance, &Account::quit,
            &Account::crash, &Account::wait_at_gate);

class Broken {
public:
  explicit Broken(int code) {
    if (code == 1)
      throw std::runtime_error("no database");
    if (code == 2)
      lumen::exit_actor();
  }
  int ping() {
    return 1;
  }
};
LUMEN_ACTOR(Broken, &Broken::ping);

class Other {
public:
  int ping() {
    return 2;
  }
};
LUMEN_ACTOR(Other, &Other::ping);

bool mentions(const std::exception& e, const std::string& part) {
  return std::string{e.what()}.find(part) != std::string::npos;
}

/// Holds `a` (balance 7) until `g` opens, then has it quit; five deposits of
/// 1 queue behind. Checks the first two calls and returns the deposits'
/// refs.
std::vector<lumen::ObjectRef<int>>
five_deposits_behind_a_quit(const lumen::ActorHandle<Account>& a, gate& g) {
  auto blocker = a.call(&Account::wait_at_gate);
  auto dying = a.call(&Account::quit);
  std::vector<lumen::ObjectRef<int>> queued;
  for (int i = 0; i < 5; ++i)
    queued.push_back(a.call(&Account::deposit, 1));
  g.open();
  BOOST_TEST(lumen::get(blocker, deadline) == 7);
  // The call that took the actor down is never retried.
  BOOST_CHECK_THROW(lumen::get(dying, deadline), lumen::actor_died);
  return queued;
}

} // namespace

BOOST_TEST_GLOBAL_FIXTURE(runtime_fixture);

BOOST_AUTO_TEST_SUITE(actor_lifecycle)

BOOST_AUTO_TEST_CASE(calls_after_kill_fail_with_actor_died) {
  auto a = lumen::actor<Account>(10).remote();
  BOOST_TEST(lumen::get(a.call(&Account::deposit, 1)) == 11);
  lumen::kill(a);
  BOOST_TEST(!a.alive());
  BOOST_CHECK_EXCEPTION(lumen::get(a.call(&Account::balance), deadline),
                        lumen::actor_died, [](const lumen::actor_died& e) {
                          return mentions(e, "killed") &&
                                 mentions(e, "Account::balance");
                        });
  lumen::kill(a); // killing twice is harmless
}

BOOST_AUTO_TEST_CASE(kill_fails_calls_still_queued) {
  gate g;
  gate in;
  held = &g;
  entered = &in;
  auto a = lumen::actor<Account>(0).remote();
  auto running = a.call(&Account::wait_at_gate);
  std::vector<lumen::ObjectRef<int>> queued;
  for (int i = 0; i < 10; ++i)
    queued.push_back(a.call(&Account::deposit, 1));
  in.wait(); // the method runs now
  entered = nullptr;
  lumen::kill(a);
  g.open();
  BOOST_TEST(lumen::get(running, deadline) == 0); // it finishes first
  for (auto& r : queued)
    BOOST_CHECK_THROW(lumen::get(r, deadline), lumen::actor_died);
}

BOOST_AUTO_TEST_CASE(named_actors_are_found_by_name) {
  auto a = lumen::actor<Account>(5).with_name("savings").remote();
  BOOST_TEST(a.name() == "savings");
  auto found = lumen::get_actor<Account>("savings");
  BOOST_REQUIRE(found.has_value());
  lumen::get(found->call(&Account::deposit, 10));
  BOOST_TEST(lumen::get(a.call(&Account::balance)) == 15);
  lumen::kill(a);
  BOOST_TEST(!lumen::get_actor<Account>("savings").has_value());
}

BOOST_AUTO_TEST_CASE(get_actor_on_a_missing_name_returns_nothing) {
  BOOST_TEST(!lumen::get_actor<Account>("no-such-actor").has_value());
}

BOOST_AUTO_TEST_CASE(a_name_clash_is_a_usage_error) {
  auto a = lumen::actor<Account>(1).with_name("dup").remote();
  BOOST_CHECK_EXCEPTION(lumen::actor<Account>(2).with_name("dup").remote(),
                        lumen::usage_error, [](const lumen::usage_error& e) {
                          return mentions(e, "'dup' already exists");
                        });
  BOOST_TEST(lumen::get(a.call(&Account::balance)) == 1);
  lumen::kill(a);
  auto b = lumen::actor<Account>(3).with_name("dup").remote(); // free again
  BOOST_TEST(lumen::get(b.call(&Account::balance)) == 3);
  lumen::kill(b);
}

BOOST_AUTO_TEST_CASE(get_actor_with_the_wrong_class_is_a_usage_error) {
  auto a = lumen::actor<Account>(1).with_name("typed").remote();
  BOOST_CHECK_EXCEPTION(lumen::get_actor<Other>("typed"), lumen::usage_error,
                        [](const lumen::usage_error& e) {
                          return mentions(e, "Account") && mentions(e, "Other");
                        });
  lumen::kill(a);
}

BOOST_AUTO_TEST_CASE(exit_actor_restarts_the_actor_from_its_constructor) {
  auto a = lumen::actor<Account>(counted_balance).with_max_restarts(2).remote();
  lumen::get(a.call(&Account::deposit, 5));
  BOOST_CHECK_EXCEPTION(
    lumen::get(a.call(&Account::quit), deadline), lumen::actor_died,
    [](const lumen::actor_died& e) { return mentions(e, "exit_actor"); });
  BOOST_TEST(a.num_restarts() == 1);
  // The constructor ran again: the deposit is gone.
  BOOST_TEST(lumen::get(a.call(&Account::balance), deadline) ==
             counted_balance);
  BOOST_TEST(constructions.load() == 2);
}

BOOST_AUTO_TEST_CASE(an_actor_out_of_restarts_stays_dead) {
  auto a = lumen::actor<Account>(1).with_max_restarts(1).remote();
  BOOST_CHECK_THROW(lumen::get(a.call(&Account::crash), deadline),
                    lumen::actor_died);
  BOOST_TEST(lumen::get(a.call(&Account::balance), deadline) == 1);
  BOOST_CHECK_EXCEPTION(
    lumen::get(a.call(&Account::crash), deadline), lumen::actor_died,
    [](const lumen::actor_died& e) { return mentions(e, "ledger corrupted"); });
  BOOST_TEST(a.num_restarts() == 1);
  BOOST_CHECK_THROW(lumen::get(a.call(&Account::balance), deadline),
                    lumen::actor_died);
  BOOST_TEST(!a.alive());
}

BOOST_AUTO_TEST_CASE(calls_queued_behind_a_dying_call_fail_instead_of_hanging) {
  gate g;
  held = &g;
  auto a = lumen::actor<Account>(7).with_max_restarts(1).remote();
  auto queued = five_deposits_behind_a_quit(a, g);
  for (auto& r : queued)
    BOOST_CHECK_THROW(lumen::get(r, deadline), lumen::actor_died);
  // Calls made after the restart reach the new instance.
  BOOST_TEST(lumen::get(a.call(&Account::balance), deadline) == 7);
}

BOOST_AUTO_TEST_CASE(
  a_call_made_after_a_queued_call_failed_reaches_the_new_actor) {
  for (int round = 0; round < 20; ++round) {
    gate g;
    held = &g;
    auto a = lumen::actor<Account>(3).with_max_restarts(1).remote();
    auto slow = lumen::task(held_value).remote(1);
    auto first = a.call(&Account::deposit, slow); // held in the host's queue
    auto dying = a.call(&Account::quit);
    std::vector<lumen::ObjectRef<int>> queued;
    for (int i = 0; i < 50; ++i)
      queued.push_back(a.call(&Account::deposit, 1));
    g.open();
    BOOST_TEST(lumen::get(first, deadline) == 4);
    BOOST_CHECK_THROW(lumen::get(dying, deadline), lumen::actor_died);
    BOOST_CHECK_THROW(lumen::get(queued[0], deadline), lumen::actor_died);
    // Made right after a queued call failed: must reach the new instance.
    BOOST_TEST_REQUIRE(lumen::get(a.call(&Account::balance), deadline) == 3);
  }
}

BOOST_AUTO_TEST_CASE(an_actor_without_restarts_dies_for_good) {
  auto a = lumen::actor<Account>(1).remote();
  BOOST_CHECK_THROW(lumen::get(a.call(&Account::quit), deadline),
                    lumen::actor_died);
  BOOST_CHECK_THROW(lumen::get(a.call(&Account::balance), deadline),
                    lumen::actor_died);
  BOOST_TEST(a.num_restarts() == 0);
}

BOOST_AUTO_TEST_CASE(a_throwing_constructor_fails_calls_with_its_cause) {
  auto a = lumen::actor<Broken>(1).with_max_restarts(3).remote();
  BOOST_CHECK_EXCEPTION(lumen::get(a.call(&Broken::ping), deadline),
                        lumen::actor_died, [](const lumen::actor_died& e) {
                          return mentions(e, "no database") &&
                                 mentions(e, "std::runtime_error");
                        });
  BOOST_TEST(a.num_restarts() == 0); // a throwing constructor would throw again
}

BOOST_AUTO_TEST_CASE(exit_actor_in_the_constructor_uses_up_the_restarts) {
  auto a = lumen::actor<Broken>(2).with_max_restarts(2).remote();
  BOOST_CHECK_THROW(lumen::get(a.call(&Broken::ping), deadline),
                    lumen::actor_died);
  BOOST_TEST(a.num_restarts() == 2);
  BOOST_TEST(!a.alive());
}

BOOST_AUTO_TEST_CASE(a_named_actor_that_dies_frees_its_name) {
  auto a = lumen::actor<Account>(1).with_name("short-lived").remote();
  BOOST_CHECK_THROW(lumen::get(a.call(&Account::quit), deadline),
                    lumen::actor_died);
  BOOST_TEST(!lumen::get_actor<Account>("short-lived").has_value());
}

BOOST_AUTO_TEST_CASE(negative_restart_counts_are_rejected) {
  BOOST_CHECK_THROW(lumen::actor<Account>(1).with_max_restarts(-1),
                    lumen::usage_error);
  BOOST_CHECK_THROW(lumen::actor<Account>(1).with_max_task_retries(-1),
                    lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(with_task_retries_queued_calls_reach_the_new_actor) {
  gate g;
  held = &g;
  auto a = lumen::actor<Account>(7)
             .with_max_restarts(1)
             .with_max_task_retries(1)
             .remote();
  auto queued = five_deposits_behind_a_quit(a, g);
  // The queued ones run on the new instance, in their order.
  std::vector<int> balances;
  for (auto& r : queued)
    balances.push_back(lumen::get(r, deadline));
  BOOST_TEST(balances == (std::vector<int>{8, 9, 10, 11, 12}),
             boost::test_tools::per_element());
  BOOST_TEST(a.num_restarts() == 1);
}

BOOST_AUTO_TEST_CASE(a_call_out_of_task_retries_fails) {
  gate g;
  held = &g;
  auto a = lumen::actor<Account>(1)
             .with_max_restarts(2)
             .with_max_task_retries(1)
             .remote();
  // The first call waits for its argument, so the host queues the others
  // behind it: all of them are queued at both deaths.
  auto slow = lumen::task(held_value).remote(1);
  auto first = a.call(&Account::deposit, slow);
  auto dying = a.call(&Account::quit);
  auto dying_again = a.call(&Account::quit);  // retried, then fatal again
  auto queued = a.call(&Account::deposit, 1); // would need a second retry
  g.open();
  BOOST_TEST(lumen::get(first, deadline) == 2);
  BOOST_CHECK_THROW(lumen::get(dying, deadline), lumen::actor_died);
  BOOST_CHECK_THROW(lumen::get(dying_again, deadline), lumen::actor_died);
  BOOST_CHECK_THROW(lumen::get(queued, deadline), lumen::actor_died);
  BOOST_TEST(lumen::get(a.call(&Account::balance), deadline) == 1);
  BOOST_TEST(a.num_restarts() == 2);
}

BOOST_AUTO_TEST_SUITE_END()
