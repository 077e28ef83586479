#define BOOST_TEST_MODULE ring_peer
#include <boost/test/unit_test.hpp>

// Ring peers in one process: a driver declares groups over them with
// create_group and drives every collective with messages, against closed
// forms; bad input answers with errors on every peer and the peers go on.

#include <chrono>
#include <string>
#include <vector>

#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

#include "closed_forms.hpp"
#include "runtime_fixture.hpp"

namespace coll = lumen::collective;
using coll::reduce_op;
using coll::ring_peer;
using lumen::ml::tensor;
using lumen::test::matches;
using lumen::test::rank_input;

namespace {

constexpr auto deadline = std::chrono::seconds(30);

std::vector<ring_peer> spawn_peers(int n) {
  std::vector<ring_peer> peers;
  for (int r = 0; r < n; ++r)
    peers.push_back(coll::spawn_ring_peer(lumen::this_node_id()));
  return peers;
}

/// Rank r's call on peer r, all sent before any is awaited.
template <class R, class F>
std::vector<R> on_all(const std::vector<ring_peer>& peers, F make_call) {
  std::vector<lumen::ObjectRef<R>> refs;
  for (size_t r = 0; r < peers.size(); ++r)
    refs.push_back(make_call(peers[r], static_cast<int>(r)));
  return lumen::get(refs, deadline);
}

/// Whether every call failed with an error whose text has `text`.
template <class F>
bool all_fail_with(const std::vector<ring_peer>& peers, F make_call,
                   const std::string& text) {
  std::vector<lumen::ObjectRef<tensor>> refs;
  for (size_t r = 0; r < peers.size(); ++r)
    refs.push_back(make_call(peers[r], static_cast<int>(r)));
  bool all = true;
  for (auto& ref : refs) {
    try {
      lumen::get(ref, deadline);
      all = false;
    } catch (const lumen::typed_actor_error& e) {
      BOOST_TEST_MESSAGE(e.what());
      all = all && std::string{e.what()}.find(text) != std::string::npos;
    }
  }
  return all;
}

} // namespace

using lumen::test::local_runtime;
BOOST_TEST_GLOBAL_FIXTURE(local_runtime);

BOOST_AUTO_TEST_SUITE(ring_peer_suite)

// Seven peers: more than the scheduler's threads, each blocking in its
// collective until the others come, which only threads of their own allow.
BOOST_AUTO_TEST_CASE(seven_peers_allreduce_every_op_against_the_closed_form) {
  const int n = 7;
  auto peers = spawn_peers(n);
  coll::create_group(peers, "seven");
  for (auto op : {reduce_op::sum, reduce_op::product, reduce_op::min,
                  reduce_op::max, reduce_op::average}) {
    auto out = on_all<tensor>(peers, [&](const ring_peer& p, int r) {
      return lumen::call(p, coll::allreduce_atom::value, "seven",
                         rank_input(r, 1000), op);
    });
    for (auto& t : out)
      BOOST_TEST(matches(t, op, n), coll::to_string(op));
  }
  coll::destroy_group(peers, "seven");
}

BOOST_AUTO_TEST_CASE(reduce_broadcast_allgather_reducescatter_and_barrier) {
  const int n = 3;
  const size_t len = 10;
  auto peers = spawn_peers(n);
  coll::create_group(peers, "rest");
  auto reduced = on_all<tensor>(peers, [&](const ring_peer& p, int r) {
    return lumen::call(p, coll::reduce_atom::value, "rest", rank_input(r, len),
                       int32_t{1}, reduce_op::max);
  });
  BOOST_TEST(matches(reduced[1], reduce_op::max, n));
  BOOST_TEST(reduced[0].data<float>()[0] == lumen::test::input(0, 0));
  auto cast = on_all<tensor>(peers, [&](const ring_peer& p, int r) {
    return lumen::call(p, coll::broadcast_atom::value, "rest",
                       rank_input(r, len), int32_t{2});
  });
  for (auto& t : cast)
    BOOST_TEST(t.to_vector<float>() == rank_input(2, len).to_vector<float>());
  auto gathered =
    on_all<std::vector<tensor>>(peers, [&](const ring_peer& p, int r) {
      return lumen::call(p, coll::allgather_atom::value, "rest",
                         rank_input(r, len));
    });
  for (auto& all : gathered) {
    BOOST_REQUIRE_EQUAL(all.size(), static_cast<size_t>(n));
    for (int q = 0; q < n; ++q)
      BOOST_TEST(all[static_cast<size_t>(q)].to_vector<float>() ==
                 rank_input(q, len).to_vector<float>());
  }
  auto scattered = on_all<tensor>(peers, [&](const ring_peer& p, int r) {
    std::vector<tensor> parts(n, rank_input(r, len));
    return lumen::call(p, coll::reducescatter_atom::value, "rest", parts,
                       reduce_op::sum);
  });
  for (auto& t : scattered)
    BOOST_TEST(matches(t, reduce_op::sum, n));
  std::vector<lumen::ObjectRef<void>> barriers;
  for (auto& p : peers)
    barriers.push_back(lumen::call(p, coll::barrier_atom::value, "rest"));
  lumen::get(barriers, deadline);
  coll::destroy_group(peers, "rest");
}

BOOST_AUTO_TEST_CASE(mismatched_lengths_fail_every_peer_and_the_group_goes_on) {
  auto peers = spawn_peers(3);
  coll::create_group(peers, "odd");
  BOOST_TEST(all_fail_with(
    peers,
    [](const ring_peer& p, int r) {
      return lumen::call(p, coll::allreduce_atom::value, "odd",
                         rank_input(r, r == 1 ? 5u : 4u), reduce_op::sum);
    },
    "group 'odd'"));
  auto out = on_all<tensor>(peers, [](const ring_peer& p, int r) {
    return lumen::call(p, coll::allreduce_atom::value, "odd", rank_input(r, 4),
                       reduce_op::sum);
  });
  for (auto& t : out)
    BOOST_TEST(matches(t, reduce_op::sum, 3));
  coll::destroy_group(peers, "odd");
}

BOOST_AUTO_TEST_CASE(an_unknown_group_names_itself_and_the_fix) {
  auto peers = spawn_peers(1);
  BOOST_TEST(all_fail_with(
    peers,
    [](const ring_peer& p, int r) {
      return lumen::call(p, coll::allreduce_atom::value, "nobody",
                         rank_input(r, 4), reduce_op::sum);
    },
    "create_group(peers"));
}

BOOST_AUTO_TEST_CASE(a_taken_name_fails_and_is_free_again_once_destroyed) {
  auto first = spawn_peers(2);
  auto second = spawn_peers(2);
  coll::create_group(first, "twice");
  BOOST_CHECK_EXCEPTION(
    coll::create_group(second, "twice"), lumen::typed_actor_error,
    [](const lumen::typed_actor_error& e) {
      BOOST_TEST_MESSAGE(e.what());
      return std::string{e.what()}.find("'twice'") != std::string::npos;
    });
  coll::destroy_group(first, "twice");
  coll::create_group(second, "twice");
  auto out = on_all<tensor>(second, [](const ring_peer& p, int r) {
    return lumen::call(p, coll::allreduce_atom::value, "twice",
                       rank_input(r, 100), reduce_op::average);
  });
  for (auto& t : out)
    BOOST_TEST(matches(t, reduce_op::average, 2));
  coll::destroy_group(second, "twice");
}

BOOST_AUTO_TEST_CASE(one_peer_twice_is_refused_before_anything_waits) {
  auto peers = spawn_peers(2);
  peers.push_back(peers[0]);
  BOOST_CHECK_EXCEPTION(
    coll::create_group(peers, "twice-over"), coll::collective_error,
    [](const coll::collective_error& e) {
      return std::string{e.what()}.find("ranks 0 and 2 are the same") !=
             std::string::npos;
    });
}

BOOST_AUTO_TEST_CASE(a_peer_killed_while_waiting_fails_its_caller) {
  auto peers = spawn_peers(2);
  coll::create_group(peers, "ended");
  // Rank 0 waits inside the all-reduce for rank 1, which never calls it;
  // rank 0's peer is killed meanwhile: its caller hears at once.
  auto waiting = lumen::call(peers[0], coll::allreduce_atom::value, "ended",
                             rank_input(0, 10), reduce_op::sum);
  auto answered = lumen::call(peers[0], coll::barrier_atom::value, "nobody");
  caf::anon_send_exit(peers[0], caf::exit_reason::kill);
  try {
    lumen::get(waiting, deadline);
    BOOST_ERROR("the call on a killed peer did not fail");
  } catch (const lumen::get_timeout&) {
    BOOST_ERROR("the call on a killed peer was left unanswered");
  } catch (const lumen::error& e) {
    BOOST_TEST_MESSAGE(e.what());
  }
  BOOST_CHECK_THROW(lumen::get(answered, deadline), lumen::error);
  // Rank 1 leaving ends rank 0's collective, and with it its thread.
  caf::anon_send_exit(peers[1], caf::exit_reason::kill);
}

BOOST_AUTO_TEST_CASE(no_peers_is_a_usage_error_naming_the_group) {
  BOOST_CHECK_EXCEPTION(coll::create_group({}, "empty"), coll::collective_error,
                        [](const coll::collective_error& e) {
                          return std::string{e.what()}.find("'empty'") !=
                                 std::string::npos;
                        });
}

BOOST_AUTO_TEST_SUITE_END()
