#include "objects/object_exchange.hpp"

// The exchange's traffic on the data plane: fetching a value from its
// owner, serving fetches and counts given back, and batching the counts
// this process gives back (object_exchange.cpp keeps the tables).

#include <chrono>
#include <cstring>

#include "lumen/detail/runtime.hpp"
#include "lumen/errors.hpp"

#include "node/data_server.hpp"
#include "transport/protocol.hpp"

namespace lumen::detail {

namespace {

enum class object_op : uint8_t { fetch = 1, give_back = 2 };

// Counts given back wait at most this long, or until this many are queued.
constexpr auto batch_period = std::chrono::milliseconds(20);
constexpr size_t batch_size = 4096;

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

} // namespace

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
    [shared_done](reply_status s, const std::shared_ptr<bytes>& out) {
      if (s == reply_status::ok)
        (*shared_done)(nullptr, *out);
      else
        (*shared_done)(decode_error(*out), *out);
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
        batch, [](reply_status, const std::shared_ptr<bytes>&) {},
        [](const std::string&) {});
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

} // namespace lumen::detail
