#include "object_exchange.hpp"

#include <chrono>
#include <cstring>

#include "lumen/detail/runtime.hpp"
#include "lumen/errors.hpp"

#include "data_server.hpp"
#include "protocol.hpp"

namespace lumen::detail {

namespace {

enum class object_op : uint8_t { fetch = 1, give_back = 2 };

// Counts given back wait at most this long, or until this many are queued.
constexpr auto batch_period = std::chrono::milliseconds(20);
constexpr size_t batch_size = 4096;

struct installed_slot {
  std::mutex mtx;
  std::shared_ptr<object_exchange> exchange; // under mtx
};

// Never destroyed: a script that returns without lumen::shutdown() has its
// runtime ended after static destructors ran, and uninstalls then.
installed_slot& the_slot() {
  static auto* slot = new installed_slot;
  return *slot;
}

template <class T>
void append(bytes& out, const T& x) {
  auto p = reinterpret_cast<const char*>(&x);
  out.insert(out.end(), p, p + sizeof(T));
}

template <class T>
T read_at(const bytes& in, size_t pos) {
  T x;
  std::memcpy(&x, in.data() + pos, sizeof(T));
  return x;
}

std::exception_ptr lost_owner(const ref_wire& w, const std::string& why) {
  return std::make_exception_ptr(owner_died(
    "object " + std::to_string(w.object) + " is lost: its owner, " + w.node +
    " at " + w.owner + ", is gone (" + why +
    "). A value lives in the process that made it: keep that process "
    "running while others read its refs, or pass the value itself"));
}

std::shared_ptr<object_exchange> required_exchange() {
  auto ex = object_exchange::installed();
  if (!ex)
    throw usage_error("an ObjectRef or ActorHandle can only be sent to another "
                      "process of a cluster; this process is in none");
  return ex;
}

} // namespace

borrow::borrow(ref_wire w, std::weak_ptr<object_exchange> exchange)
  : wire(std::move(w))
  , exchange_(std::move(exchange)) {
  if (auto ex = exchange_.lock())
    ex->borrowed_.fetch_add(1);
}

borrow::~borrow() {
  if (auto ex = exchange_.lock()) {
    ex->borrowed_.fetch_sub(1);
    ex->give_back(wire.holder, wire.hold);
  }
}

object_exchange::object_exchange(credentials creds)
  : creds_(std::move(creds)) {
  batcher_ = std::thread{[this] { run_batches(); }};
}

object_exchange::~object_exchange() {
  stop();
}

void object_exchange::serve_at(std::string address) {
  std::lock_guard<std::mutex> guard{mtx_};
  self_ = std::move(address);
}

void object_exchange::install(std::shared_ptr<object_exchange> exchange) {
  auto& slot = the_slot();
  std::shared_ptr<object_exchange> previous; // released outside the lock
  std::lock_guard<std::mutex> guard{slot.mtx};
  previous = std::move(slot.exchange);
  slot.exchange = std::move(exchange);
}

std::shared_ptr<object_exchange> object_exchange::installed() {
  auto& slot = the_slot();
  std::lock_guard<std::mutex> guard{slot.mtx};
  return slot.exchange;
}

void object_exchange::stop() {
  std::unordered_map<uint64_t, exported> doomed;
  std::unordered_map<uint64_t, hold_entry> doomed_holds;
  std::unordered_map<std::string, std::shared_ptr<data_client>> owners;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (closing_)
      return;
    closing_ = true;
    returns_cv_.notify_all();
  }
  if (batcher_.joinable())
    batcher_.join();
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    doomed.swap(exports_);
    doomed_holds.swap(holds_);
    kept_ = 0;
    owners.swap(owners_);
  }
  for (auto& [address, c] : owners)
    c->stop("the runtime shut down");
  // `doomed` goes last: a borrowed state in it gives its count back, which
  // needs the lock.
}

ref_wire object_exchange::export_object(const std::shared_ptr<object_state>& st,
                                        uint64_t type, value_encoder encoder) {
  ref_wire w;
  w.type = type;
  auto name = this_node();
  std::lock_guard<std::mutex> guard{mtx_};
  if (self_.empty())
    throw usage_error("this process serves no data port, so refs it sends "
                      "could not be read; join the cluster as a script or "
                      "node");
  if (auto lease = st->lease()) {
    auto& origin = (*lease)->wire;
    w.owner = origin.owner;
    w.node = origin.node;
    w.object = origin.object;
  } else {
    w.owner = self_;
    w.node = std::move(name);
    w.object = st->id();
  }
  w.holder = self_;
  w.hold = next_hold_++;
  holds_[w.hold].object = st->id();
  auto& e = exports_[st->id()];
  if (!e.st) {
    e.st = st;
    e.encoder = encoder;
    e.type = type;
  }
  ++e.holds;
  return w;
}

ref_wire object_exchange::hold(std::shared_ptr<void> keep) {
  ref_wire w;
  std::lock_guard<std::mutex> guard{mtx_};
  if (self_.empty())
    throw usage_error("this process serves no data port, so handles it "
                      "sends could not be used; join the cluster as a "
                      "script or node");
  w.holder = self_;
  w.hold = next_hold_++;
  holds_[w.hold].keep = std::move(keep);
  ++kept_;
  return w;
}

void object_exchange::end_hold(uint64_t id,
                               std::vector<std::shared_ptr<void>>& doomed) {
  auto h = holds_.find(id);
  if (h == holds_.end())
    return; // given back already
  if (h->second.keep) {
    doomed.push_back(std::move(h->second.keep));
    --kept_;
  } else {
    auto e = exports_.find(h->second.object);
    if (e != exports_.end() && --e->second.holds == 0) {
      doomed.push_back(std::move(e->second.st));
      exports_.erase(e);
    }
  }
  holds_.erase(h);
}

std::string object_exchange::address() {
  std::lock_guard<std::mutex> guard{mtx_};
  return self_;
}

imported_object object_exchange::import_object(const ref_wire& w) {
  std::string self;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    self = self_;
  }
  if (w.owner != self)
    return {nullptr, std::make_shared<borrow>(w, weak_from_this())};
  // The ref came home: its object is in the table, held at least by the
  // count this wire carries, which goes back once the object is in hand.
  std::shared_ptr<object_state> st;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = exports_.find(w.object);
    if (i != exports_.end() && i->second.type == w.type)
      st = i->second.st;
  }
  give_back(w.holder, w.hold);
  if (!st)
    throw codec_error("a ref to object " + std::to_string(w.object) +
                      " came back to its owner, which holds no such object "
                      "of that type");
  return {std::move(st), nullptr};
}

void object_exchange::fetch(
  const borrow& lease,
  std::function<void(std::exception_ptr, const bytes&)> done) {
  const auto& w = lease.wire;
  std::shared_ptr<data_client> c;
  try {
    c = connection(w.owner);
  } catch (const std::exception& e) {
    done(lost_owner(w, e.what()), bytes{});
    return;
  }
  bytes request;
  append(request, object_op::fetch);
  append(request, w.object);
  append(request, w.type);
  fetched_.fetch_add(1);
  auto shared_done = std::make_shared<decltype(done)>(std::move(done));
  auto fail = [w, shared_done](const std::string& why) {
    (*shared_done)(lost_owner(w, why), bytes{});
  };
  bool sent = c->object(
    request,
    [shared_done](reply_status s, const bytes& out) {
      if (s == reply_status::ok)
        (*shared_done)(nullptr, out);
      else
        (*shared_done)(decode_error(out), out);
    },
    fail);
  if (!sent)
    fail("its connection closed");
}

std::shared_ptr<data_client>
object_exchange::connection(const std::string& address) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_)
      throw error("the runtime shut down");
    auto i = owners_.find(address);
    if (i != owners_.end() && !i->second->closed())
      return i->second;
  }
  auto c =
    std::make_shared<data_client>(address, creds_, "the process at " + address);
  c->start();
  std::lock_guard<std::mutex> guard{mtx_};
  auto& slot = owners_[address];
  if (stopping_ || (slot && !slot->closed())) {
    // Shut down meanwhile, or another thread connected first: that one
    // serves, and this one ends (its reader holds it until it has).
    c->fail_all("the runtime shut down");
    if (stopping_)
      throw error("the runtime shut down");
    return slot;
  }
  slot = c;
  return c;
}

void object_exchange::give_back(const std::string& holder, uint64_t hold) {
  // Released outside the lock: a borrowed state may give a count back.
  std::vector<std::shared_ptr<void>> doomed;
  std::lock_guard<std::mutex> guard{mtx_};
  if (holder == self_) {
    end_hold(hold, doomed);
    return;
  }
  if (stopping_)
    return;
  auto& batch = returns_[holder];
  if (batch.empty())
    append(batch, object_op::give_back);
  append(batch, hold);
  if (++returns_queued_ >= batch_size)
    returns_cv_.notify_one();
}

void object_exchange::run_batches() {
  std::unique_lock<std::mutex> guard{mtx_};
  for (bool last = false; !last;) {
    returns_cv_.wait_for(guard, batch_period, [this] {
      return closing_ || returns_queued_ >= batch_size;
    });
    // What was dropped before the shutdown still goes back, once.
    last = closing_;
    if (returns_.empty())
      continue;
    auto batches = std::move(returns_);
    returns_.clear();
    returns_queued_ = 0;
    guard.unlock();
    flush(std::move(batches));
    guard.lock();
  }
}

void object_exchange::flush(std::unordered_map<std::string, bytes> batches) {
  for (auto& [holder, batch] : batches) {
    try {
      // A holder that is gone has nothing left to free.
      connection(holder)->object(
        batch, [](reply_status, const bytes&) {}, [](const std::string&) {});
    } catch (const std::exception&) {
    }
  }
}

void object_exchange::serve(const std::shared_ptr<data_connection>& c,
                            uint64_t id, const bytes& payload) {
  auto malformed = [&] {
    reply_error(c, id,
                std::make_exception_ptr(codec_error("malformed object frame")));
  };
  if (payload.empty())
    return malformed();
  auto op = static_cast<object_op>(payload[0]);
  if (op == object_op::fetch) {
    if (payload.size() != 1 + 2 * sizeof(uint64_t))
      return malformed();
    return serve_fetch(c, id, read_at<uint64_t>(payload, 1),
                       read_at<uint64_t>(payload, 1 + sizeof(uint64_t)));
  }
  constexpr size_t entry = sizeof(uint64_t);
  if (op != object_op::give_back || (payload.size() - 1) % entry != 0)
    return malformed();
  std::vector<std::shared_ptr<void>> doomed; // released outside the lock
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (size_t pos = 1; pos < payload.size(); pos += entry)
      end_hold(read_at<uint64_t>(payload, pos), doomed);
  }
  c->send(frame_kind::reply, reply_status::ok, id, {});
}

void object_exchange::serve_fetch(const std::shared_ptr<data_connection>& c,
                                  uint64_t id, uint64_t object, uint64_t type) {
  std::shared_ptr<object_state> st;
  value_encoder encoder = nullptr;
  uint64_t held_type = 0;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = exports_.find(object);
    if (i != exports_.end()) {
      st = i->second.st;
      encoder = i->second.encoder;
      held_type = i->second.type;
    }
  }
  if (!st)
    return reply_error(
      c, id,
      std::make_exception_ptr(error("object " + std::to_string(object) +
                                    " is no longer held by " + this_node() +
                                    ": every ref it sent out was given back")));
  if (held_type != type)
    return reply_error(c, id,
                       std::make_exception_ptr(codec_error(
                         "object " + std::to_string(object) +
                         " was asked for as another value type than its own")));
  served_.fetch_add(1);
  // Weak: a state that is never published must not keep itself alive.
  st->on_ready([c, id, weak = std::weak_ptr<object_state>{st}, encoder] {
    auto st = weak.lock();
    if (!st)
      return;
    if (st->failed())
      return reply_error(c, id, st->error());
    encoded_value out;
    try {
      out = encoder(*st);
    } catch (...) {
      return reply_error(c, id, std::current_exception());
    }
    c->send(frame_kind::reply, reply_status::ok, id,
            {span_of(out.head), out.body});
  });
}

ref_stats object_exchange::stats() {
  ref_stats out;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    out.held = exports_.size() + kept_;
  }
  out.borrowed = borrowed_.load();
  out.served = served_.load();
  out.fetched = fetched_.load();
  return out;
}

ref_wire export_object(const std::shared_ptr<object_state>& st, uint64_t type,
                       value_encoder encoder) {
  return required_exchange()->export_object(st, type, encoder);
}

imported_object import_object(const ref_wire& wire) {
  return required_exchange()->import_object(wire);
}

void fetch_object(const std::shared_ptr<borrow>& lease,
                  std::function<void(std::exception_ptr, const bytes&)> done) {
  if (auto ex = object_exchange::installed()) {
    ex->fetch(*lease, std::move(done));
    return;
  }
  done(std::make_exception_ptr(error(
         "lumen::get: the runtime shut down before this ref's value arrived")),
       bytes{});
}

} // namespace lumen::detail

namespace lumen {

ref_stats ref_counts() {
  auto ex = detail::object_exchange::installed();
  return ex ? ex->stats() : ref_stats{};
}

} // namespace lumen
