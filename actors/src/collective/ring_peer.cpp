#include "lumen/collective/ring_peer.hpp"

#include <exception>
#include <functional>
#include <memory>
#include <type_traits>
#include <unordered_map>

#include <caf/message_view.hpp>
#include <caf/result.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/util/work_queue.hpp>

#include "collective/groups.hpp"

namespace lumen::collective {

namespace {

using done_atom = caf::atom_constant<caf::atom("lcdone")>;

/// A peer's state: its member thread, and the requests under way there.
/// Collectives block until every member comes, so they run on the
/// peer's own thread (its memberships are that thread's), never on the
/// scheduler's; the thread tells the peer when one is done, and the peer
/// answers from its own context, as CAF's response promises want.
struct peer_state {
  /// A request under way: how to answer it, and its promise, to fail it
  /// if the peer ends first (CAF would leave its caller waiting).
  struct pending {
    std::function<void()> answer;
    caf::response_promise promise;
  };
  uint64_t next_job = 0;
  std::unordered_map<uint64_t, pending> answers;
  // Last: its destructor runs what is queued and joins the thread, while
  // the rest is still there (their answers find the peer gone: the
  // destructor has failed their callers, as CAF would not).
  std::unique_ptr<util::work_queue> member =
    std::make_unique<util::work_queue>();

  ~peer_state() {
    for (auto& [id, p] : answers)
      p.promise.deliver(caf::make_error(
        caf::sec::runtime_error, std::string{"the ring peer ended before its "
                                             "collective did"}));
  }
};

using peer_pointer = ring_peer::stateful_pointer<peer_state>;

/// A peer's fix differs from a thread's: the driver declares its groups.
void require_member(const std::string& group) {
  if (!is_group_initialized(group))
    throw collective_error("this ring peer is not a member of group '" + group +
                             "'; declare the group over the peers first: "
                             "lumen::collective::create_group(peers, \"" +
                             group + "\")",
                           errc::usage);
}

/// Runs `run` on the peer's member thread and answers with its result,
/// or with its error (an exception must not end the peer, and its group
/// with it). `group` is checked first unless it is being joined.
template <class T, class F>
caf::typed_response_promise<T>
on_member(peer_pointer self, const std::string& group, bool joining, F run) {
  auto rp = self->make_response_promise<T>();
  using value = std::conditional_t<std::is_void<T>::value, caf::unit_t, T>;
  struct outcome {
    value result{};
    caf::error err;
  };
  auto out = std::make_shared<outcome>();
  auto id = ++self->state.next_job;
  caf::response_promise untyped = rp;
  self->state.answers.emplace(
    id, peer_state::pending{[untyped, out]() mutable {
                              if (out->err)
                                untyped.deliver(std::move(out->err));
                              else
                                untyped.deliver(std::move(out->result));
                            },
                            untyped});
  caf::weak_actor_ptr peer = self->ctrl();
  self->state.member->post([=]() mutable {
    try {
      if (!joining)
        require_member(group);
      if constexpr (std::is_void<T>::value)
        run();
      else
        out->result = run();
    } catch (const std::exception& e) {
      out->err =
        caf::make_error(caf::sec::runtime_error, std::string{e.what()});
    }
    if (auto alive = peer.lock())
      caf::anon_send(caf::actor_cast<caf::actor>(alive), done_atom::value, id);
  });
  return rp;
}

ring_peer::behavior_type peer(peer_pointer self) {
  // The member thread's "done" is no message of the interface: it comes
  // to the handler of everything else, which answers the request.
  self->set_default_handler(
    [self](caf::scheduled_actor*,
           caf::message_view& xs) -> caf::result<caf::message> {
      auto& msg = xs.content();
      if (msg.match_elements<done_atom, uint64_t>()) {
        auto i = self->state.answers.find(msg.get_as<uint64_t>(1));
        if (i != self->state.answers.end()) {
          i->second.answer();
          self->state.answers.erase(i);
        }
        return caf::message{};
      }
      return caf::sec::unexpected_message;
    });
  return {
    [=](join_atom, const std::string& group, int32_t world, int32_t rank) {
      return on_member<void>(self, group, true,
                             [=] { init_group(world, rank, group); });
    },
    [=](leave_atom, const std::string& group) {
      return on_member<void>(self, group, false, [=] { destroy_group(group); });
    },
    [=](allreduce_atom, const std::string& group, ml::tensor t, reduce_op op) {
      return on_member<ml::tensor>(self, group, false, [=]() mutable {
        allreduce(t, group, op);
        return t;
      });
    },
    [=](reduce_atom, const std::string& group, ml::tensor t, int32_t dst,
        reduce_op op) {
      return on_member<ml::tensor>(self, group, false, [=]() mutable {
        reduce(t, dst, group, op);
        return t;
      });
    },
    [=](broadcast_atom, const std::string& group, ml::tensor t, int32_t src) {
      return on_member<ml::tensor>(self, group, false, [=]() mutable {
        broadcast(t, src, group);
        return t;
      });
    },
    [=](allgather_atom, const std::string& group, const ml::tensor& t) {
      return on_member<std::vector<ml::tensor>>(self, group, false, [=] {
        std::vector<ml::tensor> out;
        allgather(out, t, group);
        return out;
      });
    },
    [=](reducescatter_atom, const std::string& group,
        const std::vector<ml::tensor>& parts, reduce_op op) {
      return on_member<ml::tensor>(self, group, false, [=] {
        ml::tensor out;
        reducescatter(out, parts, group, op);
        return out;
      });
    },
    [=](barrier_atom, const std::string& group) {
      return on_member<void>(self, group, false, [=] { barrier(group); });
    },
  };
}

/// Asks every peer at once (joins and leaves wait for each other) and
/// returns once all answered, throwing the first error to come.
template <class Atom>
void ask_all(const std::vector<ring_peer>& peers, const std::string& group,
             Atom atom) {
  std::vector<ObjectRef<void>> pending;
  auto world = static_cast<int32_t>(peers.size());
  for (int32_t rank = 0; rank < world; ++rank) {
    auto& p = peers[static_cast<size_t>(rank)];
    if constexpr (std::is_same<Atom, join_atom>::value)
      pending.push_back(lumen::call(p, atom, group, world, rank));
    else
      pending.push_back(lumen::call(p, atom, group));
  }
  // Every answer first: a peer still joining when another failed would
  // otherwise hold its thread past the call, and a retry would queue
  // behind it.
  lumen::wait(pending, pending.size());
  for (auto& ref : pending)
    lumen::get(ref);
}

} // namespace

LUMEN_TYPED_ACTOR(ring_peer_name, peer);
LUMEN_MESSAGE_TYPE(ml::tensor, "lumen::ml::tensor");
LUMEN_MESSAGE_TYPE(std::vector<ml::tensor>, "std::vector<lumen::ml::tensor>");
LUMEN_MESSAGE_TYPE(reduce_op, "lumen::collective::reduce_op");

ring_peer spawn_ring_peer(const std::string& node_id) {
  return lumen::spawn_on<ring_peer>(node_id, ring_peer_name);
}

void create_group(const std::vector<ring_peer>& peers,
                  const std::string& group) {
  if (peers.empty())
    throw collective_error("create_group('" + group +
                             "'): no peers given; pass one ring_peer per rank",
                           errc::usage);
  // One thread cannot hold two ranks: its second join would wait behind
  // its first, which waits for the second.
  for (size_t i = 0; i < peers.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (peers[i] == peers[j])
        throw collective_error("create_group('" + group + "'): ranks " +
                                 std::to_string(j) + " and " +
                                 std::to_string(i) +
                                 " are the same ring_peer; spawn one per rank",
                               errc::usage);
  ask_all(peers, group, join_atom::value);
}

void destroy_group(const std::vector<ring_peer>& peers,
                   const std::string& group) {
  ask_all(peers, group, leave_atom::value);
}

namespace detail {

bool ring_peer_registered() {
  return true;
}

} // namespace detail

} // namespace lumen::collective
