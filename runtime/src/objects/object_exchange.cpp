#include "objects/object_exchange.hpp"

#include "lumen/detail/runtime.hpp"
#include "lumen/errors.hpp"

namespace lumen::detail {

namespace {

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

std::shared_ptr<object_exchange> required_exchange() {
  auto ex = object_exchange::installed();
  if (!ex)
    throw_no_cluster();
  return ex;
}

} // namespace

void throw_no_cluster() {
  throw usage_error("an ObjectRef or ActorHandle can only be sent to another "
                    "process of a cluster; this process is in none");
}

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
  auto lease = st->lease();
  if (lease == nullptr)
    w.node = this_node(); // only an owner names itself
  std::lock_guard<std::mutex> guard{mtx_};
  if (self_.empty())
    throw usage_error("this process serves no data port, so refs it sends "
                      "could not be read; join the cluster as a script or "
                      "node");
  if (lease != nullptr) {
    auto& origin = (*lease)->wire;
    w.owner = origin.owner;
    w.node = origin.node;
    w.object = origin.object;
  } else {
    w.owner = self_;
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

ref_wire runtime::export_object(const std::shared_ptr<object_state>& st,
                                uint64_t type, value_encoder encoder) {
  return required_exchange()->export_object(st, type, encoder);
}

imported_object runtime::import_object(const ref_wire& wire) {
  return required_exchange()->import_object(wire);
}

actor_wire runtime::export_actor(const std::shared_ptr<actor_ref>&) {
  throw_no_cluster();
}

std::shared_ptr<actor_ref> runtime::import_actor(const actor_wire&) {
  throw_no_cluster();
}

ref_wire export_object(const std::shared_ptr<object_state>& st, uint64_t type,
                       value_encoder encoder) {
  return current_runtime().export_object(st, type, encoder);
}

imported_object import_object(const ref_wire& wire) {
  return current_runtime().import_object(wire);
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
