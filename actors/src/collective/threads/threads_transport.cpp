#include "collective/threads/threads_transport.hpp"

#include <cstring>
#include <iterator>

#include "collective/operations.hpp"

namespace lumen::collective::detail {

using clock = std::chrono::steady_clock;

threads_hub::threads_hub(std::string name, int world,
                         std::chrono::milliseconds timeout)
  : name_(std::move(name))
  , world_(world)
  , timeout_(timeout)
  , boxes_(static_cast<size_t>(world * world)) {}

void threads_hub::set_timeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> guard{mtx_};
  timeout_ = timeout;
}

threads_transport::threads_transport(std::shared_ptr<local_group> group,
                                     int rank)
  : group_(std::move(group))
  , hub_(&group_->hub())
  , rank_(rank) {}

void threads_transport::withdraw(std::unique_lock<std::mutex>& lock) {
  auto& h = *hub_;
  for (int p = 0; p < world(); ++p) {
    auto& b = h.between(rank_, p);
    h.cv_.wait(lock, [&] { return !b.copying; });
    for (auto m = b.queue.begin(); m != b.queue.end();)
      m = m->owned.empty() && !m->is_op ? b.queue.erase(m) : std::next(m);
    b.front_taken = 0;
    b.returned = b.lent;
  }
}

template <class Ready>
void threads_transport::wait(std::unique_lock<std::mutex>& lock, Ready ready,
                             int peer, const char* doing) {
  auto& h = *hub_;
  auto deadline = clock::now() + h.timeout_;
  if (!h.cv_.wait_until(lock, deadline,
                        [&] { return ready() || h.broken_.has_value(); })) {
    auto why = "group '" + h.name_ + "': rank " + std::to_string(rank_) +
               " waited " + std::to_string(h.timeout_.count()) +
               " ms for rank " + std::to_string(peer) + " during " + doing +
               " (" + current_call() +
               "), which did not come; destroy the group and make it again";
    lock.unlock();
    fail(why, errc::timeout);
  }
  if (h.broken_) {
    withdraw(lock);
    throw *h.broken_;
  }
}

void threads_transport::push(int peer, threads_hub::message m) {
  std::unique_lock<std::mutex> lock{hub_->mtx_};
  if (hub_->broken_) {
    withdraw(lock);
    throw *hub_->broken_;
  }
  auto& b = hub_->between(rank_, peer);
  if (m.data != nullptr && m.owned.empty())
    ++b.lent;
  b.queue.push_back(std::move(m));
  hub_->cv_.notify_all();
}

void threads_transport::post(int peer, const void* data, size_t n) {
  threads_hub::message m;
  m.data = static_cast<const char*>(data);
  m.n = n;
  push(peer, std::move(m));
}

void threads_transport::post_op(int peer, const op_descriptor& d) {
  threads_hub::message m;
  m.is_op = true;
  m.op = d;
  push(peer, std::move(m));
}

void threads_transport::flush() {
  std::unique_lock<std::mutex> lock{hub_->mtx_};
  for (int p = 0; p < world(); ++p) {
    auto& b = hub_->between(rank_, p);
    wait(
      lock, [&] { return b.returned == b.lent; }, p, "a send");
  }
}

threads_hub::message&
threads_transport::next_from(std::unique_lock<std::mutex>& lock, int peer,
                             bool op, const char* doing) {
  auto& b = hub_->between(peer, rank_);
  wait(
    lock, [&] { return !b.queue.empty(); }, peer, doing);
  auto& m = b.queue.front();
  if (m.is_op != op) {
    auto why = "group '" + hub_->name_ + "': rank " + std::to_string(peer) +
               (op ? " sent data where rank " + std::to_string(rank_) +
                       " expected the start of "
                   : " started another operation while rank " +
                       std::to_string(rank_) + " still expected data of ") +
               doing +
               "; every rank must call the same collectives in the same order";
    lock.unlock();
    fail(why, errc::mismatch);
  }
  return m;
}

void threads_transport::recv(int peer, void* into, size_t n,
                             const char* doing) {
  auto& h = *hub_;
  auto& b = h.between(peer, rank_);
  auto out = static_cast<char*>(into);
  while (n > 0) {
    std::unique_lock<std::mutex> lock{h.mtx_};
    auto& m = next_from(lock, peer, false, doing);
    const char* from = m.owned.empty() ? m.data : m.owned.data();
    auto k = std::min(n, m.n - b.front_taken);
    from += b.front_taken;
    // Only this member takes from the box, and the sender leaves a
    // borrowed range alone until it is taken (a failing sender waits for
    // the copy to end): the copy needs no lock.
    b.copying = true;
    lock.unlock();
    std::memcpy(out, from, k);
    lock.lock();
    b.copying = false;
    out += k;
    n -= k;
    b.front_taken += k;
    if (b.front_taken == m.n) {
      if (m.owned.empty())
        ++b.returned;
      b.queue.pop_front();
      b.front_taken = 0;
    }
    h.cv_.notify_all();
  }
}

op_descriptor threads_transport::recv_op(int peer, const char* doing) {
  std::unique_lock<std::mutex> lock{hub_->mtx_};
  auto d = next_from(lock, peer, true, doing).op;
  hub_->between(peer, rank_).queue.pop_front();
  hub_->cv_.notify_all();
  return d;
}

void threads_transport::start(op_descriptor mine, bool same_op,
                              const std::string& problem, const void* payload,
                              size_t payload_bytes) {
  slot s;
  s.seq = calls();
  s.site = site();
  s.kind = static_cast<operation_kind>(mine.what);
  s.type = static_cast<ml::dtype>(mine.type);
  s.numel = mine.numel;
  s.count = mine.count;
  s.op = static_cast<reduce_op>(mine.op);
  s.root = mine.root;
  s.algorithm = static_cast<allreduce_algorithm>(mine.algorithm);
  s.problem = problem;
  group_->start(rank_, std::move(s), [same_op](const std::vector<slot>& all) {
    return check_same(all, same_op);
  });
  if (payload != nullptr)
    for (int k = 1; k < world(); ++k)
      post((rank_ + k) % world(), payload, payload_bytes);
}

void threads_transport::agree_by_doubling(op_descriptor mine, bool same_op,
                                          const std::string& problem,
                                          const doubling_data* data) {
  start_then_rounds(mine, same_op, problem, data,
                    [this](int p, const char* bytes, size_t n) {
                      threads_hub::message m;
                      m.owned.assign(bytes, bytes + n);
                      m.n = n;
                      push(p, std::move(m));
                    });
}

void threads_transport::exchange(int right, int left, exchange_plan& plan,
                                 const char* doing) {
  flush();
  auto& h = *hub_;
  auto& out = h.between(rank_, right);
  uint64_t before = 0;
  {
    std::lock_guard<std::mutex> guard{h.mtx_};
    before = out.returned;
  }
  for (size_t i = 0;; ++i) {
    for (; !plan.out.empty(); plan.out.pop_front())
      post(right, plan.out.front().data, plan.out.front().n);
    if (i == plan.pieces_in)
      break;
    {
      std::unique_lock<std::mutex> lock{h.mtx_};
      wait(
        lock,
        [&] {
          return plan.may_receive(i,
                                  static_cast<size_t>(out.returned - before));
        },
        right, doing);
    }
    auto p = plan.where(i);
    recv(left, p.data, p.n, doing);
    plan.done(i);
  }
  flush();
}

void threads_transport::fail(const std::string& why, errc code) {
  std::optional<collective_error> first;
  {
    std::unique_lock<std::mutex> lock{hub_->mtx_};
    if (!hub_->broken_)
      hub_->broken_ = collective_error(why, code);
    hub_->cv_.notify_all();
    withdraw(lock);
    first = hub_->broken_;
  }
  // The group cannot go on: its next rounds fail with the same cause.
  group_->fail(first->what(), first->code());
  throw *first;
}

} // namespace lumen::collective::detail
