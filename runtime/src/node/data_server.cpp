#include "node/data_server.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "lumen/detail/arguments.hpp"
#include "lumen/errors.hpp"

#include "core/log.hpp"
#include "node/named_work.hpp"
#include "objects/object_exchange.hpp"
#include "objects/shared_arena.hpp"
#include "trace/trace_session.hpp"
#include "transport/protocol.hpp"
#include "transport/typed_requests.hpp"

namespace lumen::detail {

namespace {

/// Reads a length-prefixed name at `pos` of `payload`, advancing `pos`.
bool take_name(const bytes& payload, size_t& pos, std::string& name) {
  uint32_t len = 0;
  if (payload.size() - pos < sizeof(len))
    return false;
  std::memcpy(&len, payload.data() + pos, sizeof(len));
  pos += sizeof(len);
  if (payload.size() - pos < len)
    return false;
  name.assign(payload.data() + pos, len);
  pos += len;
  return true;
}

/// Sends `result` back as the reply to request `id` once it is ready.
void reply_when_ready(const std::shared_ptr<data_connection>& c, uint64_t id,
                      const std::shared_ptr<value_state<bytes>>& result) {
  std::weak_ptr<value_state<bytes>> weak = result;
  result->on_ready([c, id, weak] {
    auto st = weak.lock();
    if (!st)
      return;
    if (st->failed()) {
      auto err = encode_error(st->error());
      c->send(frame_kind::reply, reply_status::failed, id, {span_of(err)});
    } else {
      c->send(frame_kind::reply, reply_status::ok, id, {span_of(st->value())});
    }
  });
}

} // namespace

void reply_error(const std::shared_ptr<data_connection>& c, uint64_t id,
                 std::exception_ptr err) {
  auto payload = encode_error(err);
  c->send(frame_kind::reply, reply_status::failed, id, {span_of(payload)});
}

data_server::data_server(process_services& rt, const std::string& host,
                         const credentials& creds, object_exchange& objects)
  : rt_(rt)
  , objects_(objects)
  , gate_(std::make_unique<gate>(host, 0, creds, "data")) {
  gate_->open(
    [this](gated_socket link, const std::string&) { admit(std::move(link)); });
}

data_server::~data_server() {
  gate_->close(); // no more connections
  std::vector<std::thread> readers;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& c : conns_)
      c->close();
    readers = readers_.take();
  }
  join_all(readers);
}

uint16_t data_server::port() const noexcept {
  return gate_->port();
}

void data_server::expose(uint64_t id, std::weak_ptr<actor_core> core) {
  std::lock_guard<std::mutex> guard{mtx_};
  actors_[id] = {std::move(core), {}};
}

void data_server::bury(uint64_t id, std::string obituary) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (auto i = actors_.find(id); i != actors_.end())
    i->second.obituary = std::move(obituary);
}

namespace {

/// Maps the arena a peer offered, if it is on this host, and offers this
/// process's; the peer's large blocks then come through its arena, and
/// this side's go into this process's once the peer has mapped it.
void serve_arena(data_connection& c, uint64_t id, const bytes& payload) {
  auto own = shared_arena::own();
  if (payload.size() == 1 && payload[0] == arena_mapped) {
    if (own)
      c.send_shared(own);
    c.send(frame_kind::reply, reply_status::ok, id, {});
    return;
  }
  auto theirs = !payload.empty() && payload[0] == arena_offer
                  ? shared_arena::peer({payload.begin() + 1, payload.end()})
                  : nullptr;
  if (!theirs) {
    c.send(frame_kind::reply, reply_status::failed, id, {});
    return;
  }
  c.read_shared(std::move(theirs));
  c.send(frame_kind::reply, reply_status::ok, id,
         {own ? span_of(own->offer()) : byte_span{}});
}

} // namespace

void data_server::admit(gated_socket link) {
  auto c = std::make_shared<data_connection>(std::move(link));
  std::lock_guard<std::mutex> guard{mtx_};
  try {
    readers_.start([this, c] { serve(c); });
    conns_.push_back(c);
  } catch (const std::system_error&) {
    c->close(); // no thread to serve it: refuse the connection
  }
}

void data_server::serve(std::shared_ptr<data_connection> c) {
  try {
    // Before the frames: it must outlive the loop, whatever ends it.
    typed_stand_ins typed{rt_.system(), c};
    trace_server tracing; // stops recording for the asker when it goes
    started_work work;    // what this connection's peer may cancel
    frame_header h{};
    std::shared_ptr<bytes> payload;
    landed_block block; // a large block that came through shared memory
    while (c->receive(h, payload, max_payload, block)) {
      if (block.place.size != 0 &&
          h.kind != static_cast<uint8_t>(frame_kind::typed))
        payload = put_back_together(*payload, std::exchange(block, {}));
      if (h.kind == static_cast<uint8_t>(frame_kind::task))
        work.add(h.id, run_task(c, h.id, std::move(payload)));
      else if (h.kind == static_cast<uint8_t>(frame_kind::call))
        work.add(h.id, run_call(c, h.id, std::move(payload)));
      else if (h.kind == static_cast<uint8_t>(frame_kind::cancel))
        cancel(c, h.id, *payload, work);
      else if (h.kind == static_cast<uint8_t>(frame_kind::typed))
        typed.serve(h.id, std::move(payload), std::exchange(block, {}));
      else if (h.kind == static_cast<uint8_t>(frame_kind::trace))
        tracing.serve(c, h.id, *payload);
      else if (h.kind == static_cast<uint8_t>(frame_kind::object))
        objects_.serve(c, h.id, *payload);
      else if (h.kind == static_cast<uint8_t>(frame_kind::kill))
        kill(c, h.id, *payload);
      else if (h.kind == static_cast<uint8_t>(frame_kind::arena))
        serve_arena(*c, h.id, *payload);
      else
        break; // not a request: the peer is confused, drop it
    }
  } catch (const std::exception& e) {
    log_line(std::string{"dropped a data connection: "} + e.what());
  }
  c->close();
  std::lock_guard<std::mutex> guard{mtx_};
  conns_.erase(std::remove(conns_.begin(), conns_.end(), c), conns_.end());
  readers_.done();
}

std::shared_ptr<cancellable>
data_server::run_task(const std::shared_ptr<data_connection>& c, uint64_t id,
                      std::shared_ptr<bytes> payload) {
  size_t pos = 0;
  std::string name, resources;
  resource_request request;
  try {
    if (!take_name(*payload, pos, name) || !take_name(*payload, pos, resources))
      throw codec_error("malformed task frame");
    if (!resources.empty())
      request = std::get<0>(decode<resource_request>(
        byte_span{resources.data(), resources.size()}));
    check_resources(request, "a task frame");
    rt_.resources().require_feasible(request, "node " + this_node());
  } catch (...) {
    reply_error(c, id, std::current_exception());
    return nullptr;
  }
  auto entry = find_function(name);
  if (entry == nullptr) {
    reply_error(c, id,
                std::make_exception_ptr(usage_error(
                  "node " + this_node() + " has no remote function '" + name +
                  "': start it with --code-path to a library that registers "
                  "it with LUMEN_REMOTE")));
    return nullptr;
  }
  auto result = std::make_shared<value_state<bytes>>();
  reply_when_ready(c, id, result);
  byte_span args{payload->data() + pos, payload->size() - pos};
  auto task =
    std::make_shared<named_task>(result, *entry, std::move(payload), args);
  task->trace_flow = id; // the asker's arrow, if it traces
  task->resources = std::move(request);
  rt_.run_local(task);
  return task;
}

std::shared_ptr<actor_core> data_server::exposed(uint64_t id,
                                                 std::string& gone) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = actors_.find(id);
  auto core = i != actors_.end() ? i->second.core.lock() : nullptr;
  if (!core)
    gone = i != actors_.end() && !i->second.obituary.empty()
             ? i->second.obituary + " (on node " + this_node() + ")"
             : "the actor is gone from node " + this_node();
  return core;
}

void data_server::kill(const std::shared_ptr<data_connection>& c, uint64_t id,
                       const bytes& payload) {
  uint64_t actor = 0;
  if (payload.size() != sizeof(actor))
    return reply_error(
      c, id, std::make_exception_ptr(codec_error("malformed kill frame")));
  std::memcpy(&actor, payload.data(), sizeof(actor));
  std::string gone;
  if (auto core = exposed(actor, gone))
    rt_.kill_core(*core);
  c->send(frame_kind::reply, reply_status::ok, id, {});
}

std::shared_ptr<cancellable>
data_server::run_call(const std::shared_ptr<data_connection>& c, uint64_t id,
                      std::shared_ptr<bytes> payload) {
  uint64_t actor = 0;
  size_t pos = sizeof(actor);
  std::string method;
  std::exception_ptr refusal;
  std::shared_ptr<actor_core> core;
  const method_entry* entry = nullptr;
  if (payload->size() < pos || !take_name(*payload, pos, method)) {
    refusal = std::make_exception_ptr(codec_error("malformed call frame"));
  } else {
    std::memcpy(&actor, payload->data(), sizeof(actor));
    std::string gone;
    core = exposed(actor, gone);
    if (!core)
      refusal = std::make_exception_ptr(actor_died(gone));
    else if ((entry = core->cls.find(method)) == nullptr)
      refusal = std::make_exception_ptr(
        usage_error(method + " is not registered for " + core->cls.name +
                    " on node " + this_node()));
  }
  if (refusal) {
    reply_error(c, id, refusal);
    return nullptr;
  }
  auto result = std::make_shared<value_state<bytes>>();
  reply_when_ready(c, id, result);
  byte_span args{payload->data() + pos, payload->size() - pos};
  auto call =
    std::make_shared<named_call>(result, *entry, std::move(payload), args);
  call->core = core;
  call->trace_flow = id;
  if (core->dead)
    return nullptr; // dropping the call replies actor_died
  call->generation = core->generation.load();
  send_call(*core, call);
  return call;
}

void data_server::cancel(const std::shared_ptr<data_connection>& c, uint64_t id,
                         const bytes& payload, started_work& work) {
  uint64_t request = 0;
  uint8_t force = 0;
  if (payload.size() != sizeof(request) + sizeof(force) ||
      static_cast<uint8_t>(payload[sizeof(request)]) > 1)
    return reply_error(
      c, id, std::make_exception_ptr(codec_error("malformed cancel frame")));
  std::memcpy(&request, payload.data(), sizeof(request));
  force = static_cast<uint8_t>(payload[sizeof(request)]);
  if (auto w = work.find(request)) {
    // Only a task still running is worth ending this process for: one that
    // finished, its reply on the way, is not.
    auto* task = dynamic_cast<task_spec*>(w.get());
    bool running =
      task != nullptr && task->started() && !task->result()->ready();
    w->cancel(false); // force is this process's business, below
    if (force != 0 && running)
      rt_.force_end("lumen::cancel(force) of task " + task->function().name +
                    ", which runs here");
  }
  c->send(frame_kind::reply, reply_status::ok, id, {});
}

void started_work::add(uint64_t id, std::shared_ptr<cancellable> w) {
  if (!w)
    return;
  // Entries of finished work are dropped whenever the table doubled, so
  // that it stays as long as the work still running.
  if (by_id_.size() >= 2 * live_after_prune_) {
    for (auto i = by_id_.begin(); i != by_id_.end();)
      i = i->second.expired() ? by_id_.erase(i) : std::next(i);
    live_after_prune_ = std::max<size_t>(by_id_.size(), 32);
  }
  by_id_[id] = std::move(w);
}

std::shared_ptr<cancellable> started_work::find(uint64_t id) const {
  auto i = by_id_.find(id);
  return i != by_id_.end() ? i->second.lock() : nullptr;
}

} // namespace lumen::detail
