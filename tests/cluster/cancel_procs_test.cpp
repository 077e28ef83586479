#define BOOST_TEST_MODULE cancel_procs
#include <boost/test/unit_test.hpp>

// lumen::cancel across real processes: the driver cancels tasks and actor
// calls it sent to nodes, queued or running; force ends a node whose task
// ignores the request, and only a node; and a node stopping with work that
// never returns ends at a second signal.

#include <thread>

#include "cancel_job.hpp"
#include "cluster_fixture.hpp"

using namespace lumen::test;

BOOST_TEST_GLOBAL_FIXTURE(cluster_fixture);

namespace {

std::string key_value(const std::string& key) {
  return lumen::kv::get(key).value_or("");
}

/// Polls the store for up to 30 s; true once `key` holds `value`.
bool becomes(const std::string& key, const std::string& value) {
  return eventually([&] { return key_value(key) == value; });
}

template <class T>
bool fails_cancelled(const lumen::ObjectRef<T>& ref) {
  try {
    lumen::get(ref, deadline);
  } catch (const lumen::task_cancelled& e) {
    return e.code() == lumen::errc::task_cancelled;
  }
  return false;
}

} // namespace

BOOST_AUTO_TEST_SUITE(cancel)

BOOST_AUTO_TEST_CASE(a_task_running_on_a_node_sees_cancelled) {
  auto ref =
    lumen::task(work_until_cancelled).on_node("node-1").remote("running");
  BOOST_REQUIRE(becomes("running", "started"));
  auto asked = steady_clock::now();
  lumen::cancel(ref);
  BOOST_TEST(fails_cancelled(ref));
  BOOST_TEST(seconds_since(asked) < 1.0); // the ref does not wait for it
  BOOST_TEST(becomes("running", "cancelled"));
}

BOOST_AUTO_TEST_CASE(a_task_queued_on_a_node_never_runs) {
  // The node has two task threads: two tasks fill them, the third queues.
  auto a = lumen::task(work_until_cancelled).on_node("node-2").remote("fill-a");
  auto b = lumen::task(work_until_cancelled).on_node("node-2").remote("fill-b");
  BOOST_REQUIRE(becomes("fill-a", "started"));
  BOOST_REQUIRE(becomes("fill-b", "started"));
  // Sent, not run: remote() wrote the task to node-2's connection before
  // it returned, the cancel follows on the same connection, and the node
  // reads its frames in order, so the node has it queued when the cancel
  // comes; no wait needed.
  auto queued = lumen::task(mark_ran).on_node("node-2").remote("queued");
  lumen::cancel(queued);
  BOOST_TEST(fails_cancelled(queued));
  lumen::cancel(a);
  lumen::cancel(b);
  BOOST_TEST(becomes("fill-a", "cancelled"));
  BOOST_TEST(becomes("fill-b", "cancelled"));
  // The threads are free: a later task runs, after the queued one's turn.
  BOOST_TEST(lumen::get(lumen::task(mark_ran).on_node("node-2").remote("after"),
                        deadline) == 1);
  BOOST_TEST(key_value("queued") == "");
}

BOOST_AUTO_TEST_CASE(actor_calls_on_a_node_are_cancelled_in_place) {
  auto m = lumen::actor<Marker>().on_node("node-1").remote();
  auto running = m.call(&Marker::until_cancelled, "call-running");
  BOOST_REQUIRE(becomes("call-running", "started"));
  auto queued = m.call(&Marker::mark, "call-queued");
  auto after = m.call(&Marker::mark, "call-after");
  // As for tasks: the calls went out in order before call() returned, and
  // the cancel follows them on the same connection.
  lumen::cancel(queued);
  BOOST_TEST(fails_cancelled(queued));
  lumen::cancel(running);
  BOOST_TEST(fails_cancelled(running));
  BOOST_TEST(becomes("call-running", "cancelled"));
  BOOST_TEST(lumen::get(after, deadline) == 1);
  BOOST_TEST(key_value("call-queued") == "");
  BOOST_TEST(lumen::get(m.call(&Marker::calls), deadline) == 2);
  auto more = m.call(&Marker::until_cancelled, "call-more");
  BOOST_CHECK_THROW(lumen::cancel(more, true), lumen::usage_error);
  BOOST_TEST(becomes("call-more", "started")); // refused: it runs on
  lumen::cancel(more);
  BOOST_TEST(becomes("call-more", "cancelled"));
}

BOOST_AUTO_TEST_CASE(force_on_the_head_acts_as_a_plain_cancel) {
  auto ref =
    lumen::task(work_until_cancelled).on_node("head").remote("on-head");
  BOOST_REQUIRE(becomes("on-head", "started"));
  lumen::cancel(ref, true);
  BOOST_TEST(fails_cancelled(ref));
  BOOST_TEST(becomes("on-head", "cancelled"));
  BOOST_TEST(the_cluster->head.proc->running());
  BOOST_TEST(lumen::get(lumen::task(mark_ran).on_node("head").remote("head-on"),
                        deadline) == 1);
}

BOOST_AUTO_TEST_CASE(force_ends_the_node_of_a_task_that_ignores_cancel) {
  auto victim = the_cluster->start({"--address", the_cluster->head.address});
  auto ref = lumen::task(work_forever).on_node(victim.id).remote("forever");
  BOOST_REQUIRE(becomes("forever", "started"));
  auto asked = steady_clock::now();
  lumen::cancel(ref, true);
  BOOST_TEST(fails_cancelled(ref));
  BOOST_TEST(seconds_since(asked) < 1.0);
  auto pid = victim.proc->pid();
  BOOST_TEST(eventually([pid] { return process_gone(pid); }));
  BOOST_TEST(victim.proc->output().find("lumen::cancel(force) of task "
                                        "work_forever") != std::string::npos,
             victim.proc->output());
  // The others go on.
  BOOST_TEST(lumen::get(lumen::task(mark_ran).on_node("node-1").remote("on"),
                        deadline) == 1);
}

BOOST_AUTO_TEST_CASE(a_second_stop_signal_ends_a_node_whose_work_hangs) {
  auto n = the_cluster->start({"--address", the_cluster->head.address});
  auto key = "stuck-" + n.id;
  auto ref = lumen::task(work_forever).on_node(n.id).remote(key);
  BOOST_REQUIRE(becomes(key, "started"));
  n.proc->signal(SIGTERM);
  // Taken: a second signal sent before would merge with the first.
  BOOST_REQUIRE_MESSAGE(
    n.proc->await_output("stopping " + n.id, deadline).has_value(),
    "the node did not start stopping: " << n.proc->output());
  // Shutting down waits for the task. That the process does not end is
  // shown by no event: this hold is the window in which a shutdown that
  // did not wait would end it; it can let such a bug through, never fail
  // a good run.
  std::this_thread::sleep_for(milliseconds(300));
  BOOST_TEST(n.proc->running());
  auto again_at = steady_clock::now();
  n.proc->signal(SIGTERM);
  BOOST_TEST(n.proc->wait() == 1);
  BOOST_TEST(seconds_since(again_at) < 3.0);
  BOOST_TEST(n.proc->output().find("a second stop signal") != std::string::npos,
             n.proc->output());
  BOOST_CHECK_THROW(lumen::get(ref, deadline), lumen::actor_died);
}

BOOST_AUTO_TEST_SUITE_END()
