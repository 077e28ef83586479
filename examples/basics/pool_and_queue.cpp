// A pool of actors and a queue, as Ray's ray.util.ActorPool and
// ray.util.queue.Queue.
//
// Teaches: `lumen::util::actor_pool`, which runs each value on whichever of
// its actors is free and hands the results back in submission order; and
// `lumen::util::queue`, a bounded FIFO that tasks and actors on any node
// share, whose put waits while it is full.
//
// Run:   ./.build/examples/basics/pool_and_queue
// Prints "pool: 4 calls, 10 added", "queue: 5 items, sum 10" and
// "pool_and_queue: all steps ok".

#include <iostream>
#include <vector>

#include <lumen/lumen.hpp>

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

// [producer]
// Puts 0, 1, ..., n-1 into a queue that its caller reads.
int produce(lumen::util::queue<int> q, int n) {
  for (int i = 0; i < n; ++i)
    q.put(i); // waits while the queue is full
  return n;
}
LUMEN_REMOTE(produce);
// [/producer]

int main(int argc, char** argv) {
  lumen::init(argc, argv);
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
  lumen::shutdown();
  std::cout << "pool_and_queue: all steps ok\n";
}
