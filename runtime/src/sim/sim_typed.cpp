#include "sim/sim_typed.hpp"

#include <utility>

#include <caf/actor_companion.hpp>
#include <caf/all.hpp>

#include "lumen/caf_interop.hpp"
#include "lumen/errors.hpp"

#include "transport/typed_wire.hpp"

namespace lumen::detail {

namespace {

/// Lets at most one message through per resume, so that the seed orders
/// every message among the run's events.
constexpr size_t one_message = 1;

caf::actor_companion* companion(const caf::strong_actor_ptr& p) {
  return static_cast<caf::actor_companion*>(
    caf::actor_cast<caf::abstract_actor*>(p));
}

/// A stand-in's sender is gone with its node: what monitors it hears so.
void end_stand_in(const caf::strong_actor_ptr& p) {
  companion(p)->cleanup(
    caf::make_error(caf::exit_reason::remote_link_unreachable), nullptr);
}

caf::message failure(const std::string& why) {
  return caf::make_message(
    caf::make_error(caf::sec::request_receiver_down, why));
}

} // namespace

/// Where an actor that sends a message puts its receiver, ready: the
/// coordinator's jobs, for the run to take.
class sim_typed::unit final : public caf::execution_unit {
public:
  unit(caf::actor_system& sys, sim_typed& owner)
    : caf::execution_unit(&sys)
    , owner_(owner) {}

  void exec_later(caf::resumable* job) override {
    owner_.sched_->jobs.push_back(job);
    owner_.place_of(job);
  }

private:
  sim_typed& owner_;
};

sim_typed::sim_typed(sim::world& w)
  : world_(w) {
  cfg_.set("scheduler.policy", caf::atom("testing"));
  lumen::add_registrations(cfg_);
  sys_ = std::make_unique<caf::actor_system>(cfg_);
  // Actors still running at the end are the run's to end, not CAF's.
  sys_->await_actors_before_shutdown(false);
  sched_ = &dynamic_cast<caf::scheduler::test_coordinator&>(sys_->scheduler());
  unit_ = std::make_unique<unit>(*sys_, *this);
  epoch_ = sched_->clock().current_time;
  // Every job the coordinator takes from outside an actor (a spawn, a
  // message from a task or the script) comes through this hook.
  struct rearm {
    sim_typed* self;
    void operator()() const {
      self->place_of(self->sched_->jobs.back());
      self->sched_->after_next_enqueue(rearm{self});
    }
  };
  sched_->after_next_enqueue(rearm{this});
  placing_ = 0;
  requester_.start(*sys_);
  placing_ = -1;
  world_.feed_from([this] { feed(); });
}

sim_typed::~sim_typed() {
  world_.feed_from(nullptr);
  sys_.reset();
}

std::pair<const uint64_t, sim_typed::placed>&
sim_typed::place_of(caf::resumable* job) {
  auto* a = dynamic_cast<caf::abstract_actor*>(job);
  uint64_t id = a != nullptr ? a->id() : 0;
  auto i = actors_.find(id);
  if (i != actors_.end())
    return *i;
  static const std::string unnamed = "typed actor";
  placed p;
  p.node = placing_ >= 0 ? placing_ : world_.here();
  p.label = &unnamed;
  if (a != nullptr)
    p.self = caf::actor_cast<caf::weak_actor_ptr>(a);
  return *actors_.emplace(id, std::move(p)).first;
}

void sim_typed::feed() {
  if (stopped_)
    return;
  auto& clock = sched_->clock();
  auto now = epoch_ + std::chrono::nanoseconds{world_.time()};
  if (clock.current_time < now)
    clock.advance_time(now - clock.current_time); // due timers fire
  while (!sched_->jobs.empty()) {
    auto* job = sched_->jobs.front();
    sched_->jobs.pop_front();
    // A dead node's actors still run, to take their death: what killed
    // them is their first message.
    world_.schedule(world_.time(), [this, job] {
      world_.start_on(place_of(job).second.node, [this, job] { resume(job); });
    });
  }
  if (clock.has_pending_timeout()) {
    auto at = std::chrono::duration_cast<std::chrono::nanoseconds>(
                clock.schedule().begin()->first - epoch_)
                .count();
    if (at < timer_at_) {
      timer_at_ = at;
      world_.schedule(at, [this, at] {
        if (timer_at_ == at)
          timer_at_ = sim::no_deadline; // the next feed fires it
      });
    }
  }
}

void sim_typed::resume(caf::resumable* job) {
  auto& [id, p] = place_of(job);
  world_.set_typed_actor(id);
  running_.insert(id);
  if (!stopped_)
    world_.record("start", p.node, -1, *p.label, 0, 0);
  try {
    switch (job->resume(unit_.get(), one_message)) {
      case caf::resumable::resume_later:
        sched_->jobs.push_back(job);
        break;
      case caf::resumable::done:
      case caf::resumable::awaiting_message:
        intrusive_ptr_release(job);
        break;
      case caf::resumable::shutdown_execution_unit:
        break;
    }
  } catch (...) {
    // The run ended while the handler waited; CAF let it through.
    return;
  }
  running_.erase(id);
  if (!stopped_)
    world_.record("finish", p.node, -1, *p.label, 0, 0);
}

std::string sim_typed::node_of(const caf::actor_addr& who) {
  auto i = actors_.find(who ? who.id() : 0);
  return world_.node_name(i != actors_.end() ? i->second.node : world_.here());
}

uint64_t sim_typed::size_of(const caf::message& msg) {
  uint64_t n = 0;
  send_encoded(
    *sys_, msg, 0,
    [&n](std::vector<byte_span> parts, size_t, std::vector<const char*>) {
      for (auto& part : parts)
        n += part.size;
    });
  return n;
}

caf::expected<caf::strong_actor_ptr>
sim_typed::spawn_typed(const std::string& node_id, const std::string& name,
                       caf::message args,
                       const std::set<std::string>& interface) {
  int from = world_.here();
  int to = node_id == "local" ? from : world_.node_index(node_id);
  if (to < 0)
    throw usage_error("cannot spawn '" + name + "' on node '" + node_id +
                        "', which is not a simulated node; " +
                        world_.node_range(),
                      errc::no_such_node);
  if (!world_.alive(to))
    throw usage_error("cannot spawn '" + name + "' on " + world_.node_name(to) +
                        ", which is dead",
                      errc::node_dead);
  // The request to the node's manager and its answer cross the links.
  struct outcome {
    bool done = false;
    caf::expected<caf::strong_actor_ptr> made{caf::sec::none};
    std::function<void()> wake;
  };
  auto out = std::make_shared<outcome>();
  auto& label = world_.label("spawn " + name);
  auto work = world_.new_work();
  world_.send(from, to, size_of(args) + name.size(), label, work, [=, &label] {
    placing_ = to;
    auto h = sys_->spawn<caf::actor>(name, args, nullptr, true, &interface);
    placing_ = -1;
    if (h) {
      out->made = caf::actor_cast<caf::strong_actor_ptr>(*h);
      actors_[h->id()].label = &world_.label(name);
    } else {
      out->made = h.error();
    }
    world_.send(to, from, sizeof(uint64_t), label, work, [out] {
      out->done = true;
      if (out->wake)
        out->wake();
    });
  });
  auto deadline =
    world_.time() + std::chrono::nanoseconds{std::chrono::seconds{10}}.count();
  if (!world_.wait_until(
        [out] { return out->done; }, deadline,
        [out](const std::function<void()>& wake) { out->wake = wake; }))
    return caf::make_error(caf::sec::runtime_error,
                           world_.node_name(to) +
                             " did not answer within 10 s: it died");
  return std::move(out->made);
}

bool sim_typed::send_typed(const caf::strong_actor_ptr& target, uint64_t sender,
                           const caf::message& msg,
                           bool /*carries_handles: one process holds them all*/,
                           typed_done done) {
  if (stopped_ || !target || target->home_system != sys_.get())
    return false;
  auto i = actors_.find(target->id());
  if (i == actors_.end())
    return false;
  int from = world_.here();
  int to = i->second.node;
  if (to == from)
    return false; // CAF delivers it at once, as within a process
  auto work = world_.new_work();
  pending_[work] = {from, to, i->second.label, std::move(done)};
  if (!world_.alive(to)) {
    // As a connection to a dead process is refused.
    world_.schedule(world_.time(), [this, work, to] {
      settle(work, failure("the typed actor's node " + world_.node_name(to) +
                           " is dead"));
    });
    return true;
  }
  world_.send(from, to, size_of(msg), *i->second.label, work,
              [this, target, work, from, sender, msg] {
                if (pending_.count(work) == 0)
                  return; // failed meanwhile
                auto mid =
                  caf::make_message_id(work & caf::message_id::request_id_mask);
                target->enqueue(caf::make_mailbox_element(
                                  stand_in(from, sender), mid, {}, msg),
                                nullptr);
              });
  return true;
}

caf::strong_actor_ptr sim_typed::stand_in(int from, uint64_t sender) {
  auto key = std::make_pair(from, sender);
  auto i = stand_ins_.find(key);
  if (i != stand_ins_.end())
    return i->second;
  auto p = caf::actor_cast<caf::strong_actor_ptr>(
    sys_->spawn<caf::actor_companion, caf::hidden>());
  companion(p)->on_enqueue([this](caf::mailbox_element_ptr m) {
    if (!m->mid.is_response())
      return; // down messages and the like: nothing to answer
    answer(m->mid.request_id().integer_value(), m->move_content_to_message());
  });
  stand_ins_.emplace(key, p);
  return p;
}

void sim_typed::answer(uint64_t work, caf::message msg) {
  auto i = pending_.find(work);
  if (i == pending_.end())
    return;
  auto& p = i->second;
  world_.send(p.to, p.from, size_of(msg), *p.label, work,
              [this, work, msg] { settle(work, msg); });
}

void sim_typed::settle(uint64_t work, caf::message reply) {
  auto i = pending_.find(work);
  if (i == pending_.end())
    return;
  auto done = std::move(i->second.done);
  pending_.erase(i);
  done(true, reply);
}

void sim_typed::kill_actors(int n) {
  for (auto& [id, p] : actors_)
    if (n < 0 || p.node == n)
      if (auto a = caf::actor_cast<caf::actor>(p.self.lock()))
        caf::anon_send_exit(a, caf::exit_reason::kill);
}

void sim_typed::node_died(int n, const std::string& why) {
  kill_actors(n);
  std::vector<uint64_t> lost;
  for (auto& [work, p] : pending_)
    if (p.to == n)
      lost.push_back(work);
  for (auto work : lost)
    settle(work, failure("the typed actor's node " + world_.node_name(n) +
                         " died (" + why + ")"));
  for (auto i = stand_ins_.begin(); i != stand_ins_.end();) {
    if (i->first.first != n) {
      ++i;
      continue;
    }
    end_stand_in(i->second);
    i = stand_ins_.erase(i);
  }
}

void sim_typed::ending() {
  for (auto id : running_) {
    auto i = actors_.find(id);
    if (i == actors_.end())
      continue;
    auto* a = dynamic_cast<caf::scheduled_actor*>(
      caf::actor_cast<caf::abstract_actor*>(i->second.self.lock()));
    if (a != nullptr)
      a->set_exception_handler(
        [](caf::scheduled_actor*, std::exception_ptr&) -> caf::error {
          return caf::exit_reason::user_shutdown;
        });
  }
}

void sim_typed::stop() {
  if (stopped_)
    return;
  stopped_ = true;
  world_.feed_from(nullptr);
  for (auto& [key, p] : stand_ins_)
    end_stand_in(p);
  stand_ins_.clear();
  pending_.clear(); // their refs fail as the requests go
  kill_actors(-1);  // the adopted ones among them
  adopted_.clear();
  requester_.stop();
  sched_->clock().cancel_all();
  // The run is over: what is left runs here, and a handler that waits
  // fails at once.
  while (!sched_->jobs.empty()) {
    auto* job = sched_->jobs.front();
    sched_->jobs.pop_front();
    resume(job);
  }
}

} // namespace lumen::detail
