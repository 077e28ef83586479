// Quickstart: Ray's programming model in C++ with Lumen.
//
// Teaches: remote functions (tasks), remote classes (actors), ObjectRef
// futures with get / wait / put, passing refs as arguments, a pool of
// actors and a queue, cancelling work, how a remote exception comes back to
// the caller, and a span of your own in a trace.
//
// Run:   ./.build/examples/quickstart   (--trace run.json for a timeline)
// Prints the results of each step, ending with "quickstart: all steps ok".

#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <lumen/lumen.hpp>

// [remote-function]
// A remote function is a plain function registered by name, so that any node
// of a cluster can run it.
int square(int x) {
  return x * x;
}
LUMEN_REMOTE(square);
// [/remote-function]

int checked_sqrt(int x) {
  if (x < 0)
    throw std::domain_error("negative input " + std::to_string(x));
  int r = 0;
  while ((r + 1) * (r + 1) <= x)
    ++r;
  return r;
}
LUMEN_REMOTE(checked_sqrt);

// [remote-class]
// A remote class: each instance lives in its own actor; calls from one caller
// run one at a time, in the order they were made.
class Counter {
public:
  explicit Counter(int start)
    : n_(start) {}
  int add(int d) {
    return n_ += d;
  }
  int value() const {
    return n_;
  }

private:
  int n_;
};
LUMEN_ACTOR(Counter, &Counter::add, &Counter::value);
// [/remote-class]

// [threaded-class]
// The methods of a threaded actor may run at once: it guards what they
// share.
class Cache {
public:
  std::string fetch(const std::string& key) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50)); // slow I/O
    std::lock_guard<std::mutex> guard{mtx_};
    return seen_[key] = "value of " + key;
  }

private:
  std::mutex mtx_;
  std::map<std::string, std::string> seen_;
};
LUMEN_ACTOR(Cache, &Cache::fetch);
// [/threaded-class]

// [producer]
// Puts 0, 1, ..., n-1 into a queue that its caller reads.
int produce(lumen::util::queue<int> q, int n) {
  for (int i = 0; i < n; ++i)
    q.put(i); // waits while the queue is full
  return n;
}
LUMEN_REMOTE(produce);
// [/producer]

// [cancellable]
// Long work that stops early once lumen::cancel is called for its ref.
int count_up_to(int limit) {
  int n = 0;
  while (n < limit && !lumen::cancelled()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ++n;
  }
  return n;
}
LUMEN_REMOTE(count_up_to);
// [/cancellable]

int main(int argc, char** argv) {
  // [init]
  lumen::init(argc, argv); // an embedded local cluster in this process
  // [/init]

  // [tasks]
  lumen::ObjectRef<int> r = lumen::task(square).remote(4);
  std::cout << "square(4) = " << lumen::get(r) << "\n"; // like ray.get

  std::vector<lumen::ObjectRef<int>> squares;
  for (int i = 0; i < 5; ++i)
    squares.push_back(lumen::task(square).remote(i));
  for (int v : lumen::get(squares)) // values come back in submission order
    std::cout << v << " ";
  std::cout << "\n";
  // [/tasks]

  // [ref-arguments]
  // A ref passed where the function takes an int is resolved first.
  auto sixteen = lumen::task(square).remote(r);
  std::cout << "square(square(4)) = " << lumen::get(sixteen) << "\n";
  // [/ref-arguments]

  // [actors]
  auto c = lumen::actor<Counter>(10).with_name("c").remote();
  auto refs = std::vector{c.call(&Counter::add, 1), c.call(&Counter::add, 2)};
  auto [ready, pending] = lumen::wait(refs, 1, std::chrono::seconds(1));
  std::cout << ready.size() << " ready, " << pending.size() << " pending\n";
  auto all = lumen::get(refs); // {11, 13}
  std::cout << "counter: " << all[0] << ", " << all[1] << "\n";

  auto same = lumen::get_actor<Counter>("c"); // named actors are found by name
  std::cout << "c.value() = " << lumen::get(same->call(&Counter::value))
            << "\n";
  // [/actors]

  // [threaded]
  // Four fetches at once on one actor, as Ray's max_concurrency.
  auto cache = lumen::actor<Cache>().with_max_concurrency(4).remote();
  std::vector<lumen::ObjectRef<std::string>> fetched;
  for (auto key : {"a", "b", "c", "d"})
    fetched.push_back(cache.call(&Cache::fetch, std::string{key}));
  std::cout << "threaded: " << lumen::get(fetched).size() << " fetched\n";
  // [/threaded]

  // [put]
  auto big = lumen::put(std::vector<float>(1 << 20, 1.0f));
  std::cout << "put " << lumen::get(big).size() << " floats\n";
  // [/put]

  // [pool-and-queue]
  // Work spread over a pool of actors, results in submission order (Ray's
  // ActorPool), and a bounded queue that tasks and actors share (Ray's
  // Queue).
  std::vector<lumen::ActorHandle<Counter>> counters{
    lumen::actor<Counter>(0).remote(), lumen::actor<Counter>(0).remote()};
  lumen::util::actor_pool<Counter, int> pool{counters};
  auto sums = pool.map([](const lumen::ActorHandle<Counter>& counter,
                          int x) { return counter.call(&Counter::add, x); },
                       std::vector<int>{1, 2, 3, 4});
  int added = lumen::get(counters[0].call(&Counter::value)) +
              lumen::get(counters[1].call(&Counter::value));
  std::cout << "pool: " << sums.size() << " calls, " << added
            << " added\n"; // 4 calls, 10 added

  lumen::util::queue<int> q{2}; // holds at most two items
  auto produced = lumen::task(produce).remote(q, 5);
  int received = 0;
  for (int i = 0; i < 5; ++i)
    received += q.get();
  std::cout << "queue: " << lumen::get(produced) << " items, sum " << received
            << "\n"; // 5 items, sum 10
  // [/pool-and-queue]

  // [cancel]
  auto slow = lumen::task(count_up_to).remote(1000000); // 17 minutes
  lumen::cancel(slow); // like ray.cancel: the ref fails at once
  try {
    lumen::get(slow);
  } catch (const lumen::task_cancelled& e) {
    std::cout << "cancel: " << e.what() << "\n";
  }
  // [/cancel]

  // [resources]
  // Like Ray's num_cpus= and resources=: a task runs only where what it
  // asks for is free, and holds it while it runs; run this program with
  // --resources gpu=1 to give this process a GPU.
  auto on_a_cpu = lumen::task(square).with_num_cpus(1).remote(9);
  std::cout << "resources: square(9) = " << lumen::get(on_a_cpu) << "\n";
  try {
    lumen::task(square).with_resources({{"gpu", 1}}).remote(3);
  } catch (const lumen::usage_error& e) { // errc::infeasible, at once
    std::cout << "resources: " << e.what() << "\n";
  }
  // [/resources]

  // [placement-group]
  // Like Ray's placement groups: bundles of resources reserved together
  // (gang scheduling), each on a node the strategy picks; work placed in a
  // bundle runs on its node, from what the bundle holds.
  lumen::placement_group pg({{{"cpu", 1}}, {{"cpu", 1}}},
                            lumen::placement_strategy::pack);
  lumen::get(pg.ready());
  auto in_bundle =
    lumen::task(square).with_num_cpus(1).in_placement_group(pg, 1).remote(5);
  std::cout << "placement group: square(5) = " << lumen::get(in_bundle)
            << " in bundle 1 on " << pg.bundle_node(1) << "\n";
  lumen::remove_placement_group(pg); // ends what still runs in it
  // [/placement-group]

  // [trace]
  // With --trace FILE, every task and method call is a span on its
  // thread's row, with an arrow from where it was submitted; a span of
  // your own names a step around them.
  {
    lumen::trace::span step{"ten squares", "quickstart"};
    step.arg("tasks", 10);
    std::vector<lumen::ObjectRef<int>> ten;
    for (int i = 0; i < 10; ++i)
      ten.push_back(lumen::task(square).remote(i));
    int total = 0;
    for (int v : lumen::get(ten))
      total += v;
    std::cout << "sum of ten squares = " << total << "\n";
  }
  // [/trace]

  // [errors]
  try {
    lumen::get(lumen::task(checked_sqrt).remote(-1));
  } catch (const lumen::task_error& e) {
    std::cout << "caught: " << e.what() << "\n";
  }
  // [/errors]

  lumen::kill(c);
  lumen::shutdown();
  std::cout << "quickstart: all steps ok\n";
}
