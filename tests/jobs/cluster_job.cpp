// The remote functions and actors of the cluster tests. Nodes load this
// file as a shared library (lumen start --code-path); the test drivers
// compile it in, so both sides know the same names.

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>

#include "cancel_job.hpp"
#include "cluster_job.hpp"
#include "refs_job.hpp"

std::string where() {
  return lumen::this_node_id();
}
LUMEN_REMOTE(where);

int add(int x, int y) {
  return x + y;
}
LUMEN_REMOTE(add);

double sum(const std::vector<float>& xs) {
  double s = 0;
  for (auto x : xs)
    s += x;
  return s;
}
LUMEN_REMOTE(sum);

int fails(int x) {
  throw std::invalid_argument("bad input " + std::to_string(x));
}
LUMEN_REMOTE(fails);

// Simulated long work: returns after `ms` milliseconds.
int busy(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}
LUMEN_REMOTE(busy);

std::vector<int64_t> busy_span(int ms) {
  auto ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
  };
  auto start = ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return {start, ns()};
}
LUMEN_REMOTE(busy_span);

// Long work only on the node named `victim`; quick anywhere else.
std::string busy_on(const std::string& victim) {
  if (lumen::this_node_id() == victim)
    std::this_thread::sleep_for(std::chrono::seconds(60));
  return lumen::this_node_id();
}
LUMEN_REMOTE(busy_on);

// Runs on one node: puts a tensor there and has node `to` sum it.
double relay(const std::string& to, int n) {
  auto tensor = lumen::put(std::vector<float>(n, 1.0f));
  return lumen::get(lumen::task(sum).on_node(to).remote(tensor));
}
LUMEN_REMOTE(relay);

// Connects to the channel `name` and sits on it without a word until it
// ends; 1 if it ended with a byte, 0 with an error.
int hold_channel(const std::string& name) {
  auto c = lumen::connect(name, std::chrono::seconds(10));
  char byte = 0;
  try {
    c.recv(&byte, 1);
  } catch (const lumen::channel_error&) {
    return 0;
  }
  return 1;
}
LUMEN_REMOTE(hold_channel);

double pour(const std::string& name, int ms) {
  auto c = lumen::connect(name, std::chrono::seconds(10));
  std::vector<char> block(1 << 20, 'x');
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  double sent = 0;
  while (std::chrono::steady_clock::now() < end) {
    c.send(block.data(), block.size());
    sent += double(block.size());
  }
  return sent;
}
LUMEN_REMOTE(pour);

// The cluster's key-value store as a node sees it.
std::string kv_read(const std::string& key) {
  return lumen::kv::get(key).value_or("<none>");
}
LUMEN_REMOTE(kv_read);

bool kv_claim(const std::string& key, const std::string& value) {
  return lumen::kv::put(key, value, false);
}
LUMEN_REMOTE(kv_claim);

// Reads every ref of the list (Ray leaves refs inside containers to the
// callee).
int sum_refs(std::vector<lumen::ObjectRef<int>> refs) {
  int total = 0;
  for (auto& r : refs)
    total += lumen::get(r);
  return total;
}
LUMEN_REMOTE(sum_refs);

// Reads none of them.
int count_refs(const std::vector<lumen::ObjectRef<int>>& refs) {
  return static_cast<int>(refs.size());
}
LUMEN_REMOTE(count_refs);

std::vector<lumen::ObjectRef<int>> make_refs(int n) {
  std::vector<lumen::ObjectRef<int>> out;
  out.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    out.push_back(lumen::put(i));
  return out;
}
LUMEN_REMOTE(make_refs);

lumen::ObjectRef<std::vector<float>> make_tensor(int64_t n, float value) {
  return lumen::put(std::vector<float>(static_cast<size_t>(n), value));
}
LUMEN_REMOTE(make_tensor);

double tensor_sum(lumen::ObjectRef<std::vector<float>> ref) {
  return sum(lumen::get(ref));
}
LUMEN_REMOTE(tensor_sum);

lumen::ObjectRef<int> pass_on(lumen::ObjectRef<int> ref) {
  return ref;
}
LUMEN_REMOTE(pass_on);

std::vector<int64_t> ref_counts_here() {
  auto c = lumen::ref_counts();
  return {static_cast<int64_t>(c.held), static_cast<int64_t>(c.borrowed),
          static_cast<int64_t>(c.served), static_cast<int64_t>(c.fetched)};
}
LUMEN_REMOTE(ref_counts_here);

Counter::Counter(int start)
  : n_(start) {}

int Counter::add(int d) {
  return n_ += d;
}

std::string Counter::node() const {
  return lumen::this_node_id();
}

int Counter::nap(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return n_;
}

std::vector<int64_t> Counter::nap_span(int ms) {
  return busy_span(ms);
}

int Counter::fail() {
  throw std::out_of_range("counter overflow");
}

std::string Counter::self_id() const {
  return lumen::current_actor_id();
}

LUMEN_ACTOR(Counter, &Counter::add, &Counter::node, &Counter::nap,
            &Counter::nap_span, &Counter::fail, &Counter::self_id);

// Nodes that load this library can build a Counter from an int, as the
// drivers create it.
LUMEN_ACTOR_CTOR(Counter(int));

// Handles as values (refs_test).
int bump(lumen::ActorHandle<Counter> c, int by) {
  return lumen::get(c.call(&Counter::add, by));
}
LUMEN_REMOTE(bump);

// An actor hosted by the process that runs this task.
lumen::ActorHandle<Counter> make_counter(int start) {
  return lumen::actor<Counter>(start).remote();
}
LUMEN_REMOTE(make_counter);

std::string handle_id(lumen::ActorHandle<Counter> c) {
  return c.id();
}
LUMEN_REMOTE(handle_id);

lumen::ActorHandle<Counter> echo_handle(lumen::ActorHandle<Counter> c) {
  return c;
}
LUMEN_REMOTE(echo_handle);

void kill_it(lumen::ActorHandle<Counter> c) {
  lumen::kill(c);
}
LUMEN_REMOTE(kill_it);

int produce_into(lumen::util::queue<int> q, int n) {
  for (int i = 0; i < n; ++i)
    q.put(i);
  return n;
}
LUMEN_REMOTE(produce_into);

int64_t consume_from(lumen::util::queue<int> q, int n) {
  int64_t total = 0;
  for (int i = 0; i < n; ++i)
    total += q.get(std::chrono::seconds(30));
  return total;
}
LUMEN_REMOTE(consume_from);

Keeper::Keeper() = default;

void Keeper::keep(lumen::ActorHandle<Counter> c) {
  kept_ = std::move(c);
}

int Keeper::poke(int by) {
  return lumen::get(kept_.call(&Counter::add, by));
}

void Keeper::forget() {
  kept_ = {};
}
LUMEN_ACTOR(Keeper, &Keeper::keep, &Keeper::poke, &Keeper::forget);
LUMEN_ACTOR_CTOR(Keeper());

namespace {

int wait_for_cancel(const std::string& key) {
  lumen::kv::put(key, "started");
  while (!lumen::cancelled())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  lumen::kv::put(key, "cancelled");
  return 1;
}

} // namespace

int work_until_cancelled(const std::string& key) {
  return wait_for_cancel(key);
}
LUMEN_REMOTE(work_until_cancelled);

int mark_ran(const std::string& key) {
  lumen::kv::put(key, "ran");
  return 1;
}
LUMEN_REMOTE(mark_ran);

int work_forever(const std::string& key) {
  lumen::kv::put(key, "started");
  for (;;)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}
LUMEN_REMOTE(work_forever);

int Marker::until_cancelled(const std::string& key) {
  ++calls_;
  return wait_for_cancel(key);
}

int Marker::mark(const std::string& key) {
  ++calls_;
  return mark_ran(key);
}

int Marker::calls() const {
  return calls_;
}
LUMEN_ACTOR(Marker, &Marker::until_cancelled, &Marker::mark, &Marker::calls);
LUMEN_ACTOR_CTOR(Marker());

caf::error inspect(caf::serializer& f, byte_block& x) {
  size_t n = x.size();
  if (auto err = f.begin_sequence(n))
    return err;
  if (auto err = f.apply_raw(n, const_cast<char*>(x.data())))
    return err;
  return f.end_sequence();
}

caf::error inspect(caf::deserializer& f, byte_block& x) {
  size_t n = 0;
  if (auto err = f.begin_sequence(n))
    return err;
  x.viewed = lumen::view_received_bytes(f, n, alignof(double), x.frame);
  x.viewed_size = n;
  if (x.viewed == nullptr) {
    x.own.resize(n);
    if (auto err = f.apply_raw(n, x.own.data()))
      return err;
  }
  return f.end_sequence();
}

namespace {

block_echo::behavior_type block_echo_impl() {
  return {[](echo_atom, const byte_block& a, const byte_block& b) {
    return std::make_tuple(a, b, a.viewed != nullptr, b.viewed != nullptr);
  }};
}

bulk_sink::behavior_type bulk_sink_impl() {
  return {[](echo_atom, const calculator&, const byte_block& b) {
    return uint64_t{b.size()};
  }};
}

calculator::behavior_type calculator_impl() {
  return {[](add_atom, int32_t x, int32_t y) { return x + y; }};
}

struct tally_state {
  int64_t sum = 0;
};

tally::behavior_type tally_impl(tally::stateful_pointer<tally_state> self) {
  return {[=](add_atom, int32_t x) { return self->state.sum += x; }};
}

relay_actor::behavior_type relay_impl(relay_actor::pointer self) {
  return {[=](add_atom, const calculator& c, int32_t x,
              int32_t y) -> caf::result<int32_t> {
            auto rp = self->make_response_promise<int32_t>();
            lumen::request(self, c, caf::infinite, add_atom::value, x, y)
              .then([rp](int32_t sum) mutable { rp.deliver(sum); },
                    [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
            return rp;
          },
          [=](ask_atom, const silent_actor& s) -> caf::result<int32_t> {
            auto rp = self->make_response_promise<int32_t>();
            lumen::request(self, s, caf::infinite, ask_atom::value)
              .then([rp](int32_t x) mutable { rp.deliver(x); },
                    [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
            return rp;
          }};
}

struct silent_state {
  std::vector<caf::typed_response_promise<int32_t>> never_delivered;
};

silent_actor::behavior_type
silent_impl(silent_actor::stateful_pointer<silent_state> self) {
  return {[=](ask_atom) {
    auto rp = self->make_response_promise<int32_t>();
    self->state.never_delivered.push_back(rp);
    return rp;
  }};
}

} // namespace

LUMEN_TYPED_ACTOR("calculator", calculator_impl);
LUMEN_TYPED_ACTOR("block_echo", block_echo_impl);
LUMEN_TYPED_ACTOR("bulk_sink", bulk_sink_impl);
LUMEN_MESSAGE_TYPE(byte_block, "lumen_test::byte_block");
LUMEN_TYPED_ACTOR("silent", silent_impl);
LUMEN_TYPED_ACTOR("tally", tally_impl);
LUMEN_TYPED_ACTOR("relay", relay_impl);
LUMEN_MESSAGE_TYPE(calculator, "lumen_test::calculator");
LUMEN_MESSAGE_TYPE(silent_actor, "lumen_test::silent_actor");
