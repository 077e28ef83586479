#define BOOST_TEST_MODULE shutdown
#include <boost/test/unit_test.hpp>

// lumen::shutdown() fails every ref whose result never arrived, whatever
// was producing it, and never hangs or overflows doing so.

#include <caf/all.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/lumen.hpp>

namespace {

int add(int x, int y) {
  return x + y;
}
LUMEN_REMOTE(add);

using ask_atom = caf::atom_constant<caf::atom("ask")>;
using silent_actor = caf::typed_actor<caf::replies_to<ask_atom>::with<int32_t>>;

struct silent_state {
  std::vector<caf::typed_response_promise<int32_t>> never_delivered;
};

// Answers nothing, ever: its requests stay open until shutdown.
silent_actor::behavior_type
silent(silent_actor::stateful_pointer<silent_state> self) {
  return {[=](ask_atom) {
    auto rp = self->make_response_promise<int32_t>();
    self->state.never_delivered.push_back(rp);
    return rp;
  }};
}

class Asker {
public:
  explicit Asker(int) {}
  int ask(int) {
    return 0;
  }
};
LUMEN_ACTOR(Asker, &Asker::ask);

} // namespace

BOOST_AUTO_TEST_SUITE(shutdown)

BOOST_AUTO_TEST_CASE(an_unanswered_typed_request_fails_at_shutdown) {
  lumen::init();
  auto s = lumen::spawn(silent);
  auto r = lumen::call(s, ask_atom::value);
  lumen::shutdown();
  BOOST_CHECK_THROW(lumen::get(r), lumen::actor_died);
}

BOOST_AUTO_TEST_CASE(a_long_chain_of_waiting_tasks_fails_without_recursion) {
  lumen::init_options opts;
  opts.num_cpus = 1;
  lumen::init(opts);
  auto s = lumen::spawn(silent);
  // The root never arrives; 100,000 tasks wait on it, one on the next.
  auto root = lumen::call(s, ask_atom::value);
  auto r = lumen::task(add).remote(root, 1);
  for (int i = 0; i < 100000; ++i)
    r = lumen::task(add).remote(r, 1);
  lumen::shutdown();
  BOOST_CHECK_THROW(lumen::get(r), lumen::error);
}

BOOST_AUTO_TEST_CASE(queued_actor_calls_fail_at_shutdown) {
  lumen::init();
  auto s = lumen::spawn(silent);
  auto root = lumen::call(s, ask_atom::value);
  auto a = lumen::actor<Asker>(1).remote();
  auto waiting = a.call(&Asker::ask, root);
  lumen::shutdown();
  BOOST_CHECK_THROW(lumen::get(waiting), lumen::error);
  BOOST_CHECK_THROW(a.call(&Asker::ask, 1), lumen::usage_error);
}

BOOST_AUTO_TEST_SUITE_END()
