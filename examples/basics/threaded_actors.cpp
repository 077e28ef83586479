// Threaded actors: an actor whose methods run at once, as Ray's
// max_concurrency.
//
// Teaches: `.with_max_concurrency(n)`, which gives one actor n threads, so
// that slow calls (I/O, a wait) overlap instead of queueing; and why such an
// actor's methods guard what they share.
//
// Run:   ./.build/examples/basics/threaded_actors
// Prints "threaded: 4 fetched", how long the four 50 ms fetches took
// together (about 50 ms, not 200), and "threaded_actors: all steps ok".

#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <lumen/lumen.hpp>

// [threaded-class]
// The methods of a threaded actor may run at once: it guards what they
// share.
class Cache {
public:
  std::string fetch(const std::string& key) {
    lumen::sleep_for(std::chrono::milliseconds(50)); // slow I/O
    std::lock_guard<std::mutex> guard{mtx_};
    return seen_[key] = "value of " + key;
  }

private:
  std::mutex mtx_;
  std::map<std::string, std::string> seen_;
};
LUMEN_ACTOR(Cache, &Cache::fetch);
// [/threaded-class]

int main(int argc, char** argv) {
  lumen::init(argc, argv);
  // Lumen's clock: real here, virtual under --simulate.
  auto start = lumen::now();
  // [threaded]
  // Four fetches at once on one actor, as Ray's max_concurrency.
  auto cache = lumen::actor<Cache>().with_max_concurrency(4).remote();
  std::vector<lumen::ObjectRef<std::string>> fetched;
  for (auto key : {"a", "b", "c", "d"})
    fetched.push_back(cache.call(&Cache::fetch, std::string{key}));
  std::cout << "threaded: " << lumen::get(fetched).size() << " fetched\n";
  // [/threaded]
  std::chrono::duration<double, std::milli> took = lumen::now() - start;
  std::cout << "four 50 ms fetches took " << static_cast<int>(took.count())
            << " ms\n";
  lumen::shutdown();
  std::cout << "threaded_actors: all steps ok\n";
}
