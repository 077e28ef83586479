#define BOOST_TEST_MODULE ps_order
#include <boost/test/unit_test.hpp>

// The parameter server's order-sensitive rules under CAF's deterministic
// test coordinator (scheduler.policy = testing): the test delivers every
// message itself, one pusher after another, and fires the step timer
// when it chooses, so no outcome depends on timing.

#include <memory>
#include <optional>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/ml.hpp>

#include "ps_configs.hpp"

using namespace lumen::ml;
using lumen::test::sgd_config;

namespace {

/// What one pusher heard back.
struct answer {
  std::optional<uint64_t> version;
  tensor weights;
  std::optional<ps_refusal> refused;
};

struct coordinated {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::vector<parameter_server> servers;
  std::vector<caf::actor> pushers;

  coordinated() {
    lumen::add_registrations(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
  }

  ~coordinated() {
    // Nothing runs unless the test runs it: end the servers (which fails
    // the pushers they still owe an answer) and the pushers, then let
    // every actor finish.
    for (auto& ps : servers)
      caf::anon_send_exit(ps, caf::exit_reason::user_shutdown);
    for (auto& p : pushers)
      caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
    settle();
    sched->trigger_timeouts();
    settle();
  }

  parameter_server server(const ps_config& c, const std::vector<float>& w) {
    auto ifs = sys->message_types<parameter_server>();
    auto h = sys->spawn<caf::actor>(parameter_server_name,
                                    caf::make_message(c, tensor::from(w)),
                                    nullptr, true, &ifs);
    BOOST_REQUIRE(h);
    servers.push_back(caf::actor_cast<parameter_server>(*h));
    return servers.back();
  }

  /// A pusher of `g` at `version`, its message delivered and handled
  /// (and whatever that set off), timers left alone.
  std::shared_ptr<answer> push(const parameter_server& ps, uint64_t version,
                               std::vector<float> g) {
    auto out = std::make_shared<answer>();
    // It lives on after its answer: a pusher that ends is a worker gone,
    // and the server would stop waiting for it.
    pushers.push_back(
      sys->spawn([=](caf::event_based_actor* self) -> caf::behavior {
        self
          ->request(ps, caf::infinite, push_atom::value, version,
                    tensor::from(g))
          .then(
            [=](uint64_t v, tensor w) {
              out->version = v;
              out->weights = w;
            },
            [=](caf::error& e) {
              out->refused = static_cast<ps_refusal>(e.code());
            });
        return {[](int) {}};
      }));
    settle();
    return out;
  }

  void settle() {
    while (sched->try_run_once()) {
    }
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(ps_order, coordinated)

BOOST_AUTO_TEST_CASE(the_barrier_answers_no_one_until_the_last_then_all_alike) {
  auto ps = server(sgd_config(ps_mode::sync, 3, 1.0f), {0.0f});
  auto a = push(ps, 0, {1.0f});
  auto b = push(ps, 0, {2.0f});
  BOOST_TEST(!a->version);
  BOOST_TEST(!b->version);
  auto c = push(ps, 0, {6.0f});
  for (auto& x : {a, b, c}) {
    BOOST_REQUIRE(x->version);
    BOOST_TEST(*x->version == 1u);
    BOOST_TEST(x->weights.data<float>()[0] == -3.0f);
  }
}

BOOST_AUTO_TEST_CASE(backup_drops_exactly_the_gradients_after_the_close) {
  auto cfg = sgd_config(ps_mode::sync, 3, 1.0f);
  cfg.backup = 1;
  auto ps = server(cfg, {0.0f});
  auto a = push(ps, 0, {1.0f});
  BOOST_TEST(!a->version);
  auto b = push(ps, 0, {3.0f}); // 2 of 3 close step 0
  auto late = push(ps, 0, {100.0f});
  auto next = push(ps, 1, {2.0f});
  BOOST_TEST(*a->version == 1u);
  BOOST_TEST(*b->version == 1u);
  BOOST_TEST(b->weights.data<float>()[0] == -2.0f);
  BOOST_TEST((late->refused == ps_refusal::late));
  BOOST_TEST(!next->version); // step 1 has one gradient of two
}

BOOST_AUTO_TEST_CASE(async_staleness_is_counted_and_bounded_in_order) {
  auto cfg = sgd_config(ps_mode::async, 3, 1.0f);
  cfg.max_staleness = 1;
  auto ps = server(cfg, {0.0f});
  auto fresh = push(ps, 0, {1.0f});     // -1
  auto stale = push(ps, 0, {1.0f});     // staleness 1: -1
  auto too_stale = push(ps, 0, {1.0f}); // staleness 2: refused
  BOOST_TEST(*fresh->version == 1u);
  BOOST_TEST(*stale->version == 2u);
  BOOST_TEST(stale->weights.data<float>()[0] == -2.0f);
  BOOST_TEST((too_stale->refused == ps_refusal::too_stale));
}

BOOST_AUTO_TEST_CASE(the_step_timer_closes_a_step_with_what_it_has) {
  auto cfg = sgd_config(ps_mode::sync, 3, 1.0f);
  cfg.step_timeout_ms = 60000; // simulated: it fires when the test says
  auto ps = server(cfg, {0.0f});
  auto a = push(ps, 0, {2.0f});
  auto b = push(ps, 0, {4.0f});
  BOOST_TEST(!a->version);
  BOOST_REQUIRE(sched->trigger_timeout());
  settle();
  BOOST_REQUIRE(a->version);
  BOOST_TEST(*a->version == 1u);
  BOOST_TEST(a->weights.data<float>()[0] == -3.0f);
  BOOST_TEST(*b->version == 1u);
  // The next step waits for 3 again: the timed-out step had no pushers
  // before it to give up on.
  auto c = push(ps, 1, {1.0f});
  auto d = push(ps, 1, {1.0f});
  BOOST_TEST(!d->version);
}

BOOST_AUTO_TEST_CASE(a_step_closes_at_its_deadline_with_what_it_has) {
  using namespace std::chrono_literals;
  auto cfg = sgd_config(ps_mode::sync, 3, 1.0f);
  cfg.step_timeout_ms = 60000; // far off: only the deadline can fire
  cfg.step_deadline = 3;
  auto ps = server(cfg, {0.0f});
  // Three steps of 10 ms each: the median the deadline goes by.
  for (uint64_t v = 0; v < 3; ++v) {
    sched->clock().advance_time(10ms);
    for (int k = 0; k < 3; ++k)
      push(ps, v, {1.0f});
  }
  auto a = push(ps, 3, {2.0f});
  auto b = push(ps, 3, {4.0f});
  // Open until 30 ms after the last step closed, then closed with two.
  sched->clock().advance_time(29ms);
  settle();
  BOOST_TEST(!a->version);
  sched->clock().advance_time(1ms);
  settle();
  BOOST_REQUIRE(a->version);
  BOOST_TEST(*a->version == 4u);
  BOOST_TEST(*b->version == 4u);
  // Three steps of -1 each, then the mean of the two: -3 - 3.
  BOOST_TEST(a->weights.data<float>()[0] == -6.0f);
}

BOOST_AUTO_TEST_SUITE_END()
