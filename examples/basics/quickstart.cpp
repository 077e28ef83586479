// Quickstart: Ray's programming model in C++ with Lumen.
//
// Teaches: remote functions (tasks), remote classes (actors), ObjectRef
// futures with get / wait / put, passing refs as arguments, named actors,
// how a remote exception comes back to the caller, and a span of your own
// in a timeline.
//
// Run:   ./.build/examples/basics/quickstart   (--trace run.json for a
// timeline) Prints the result of each step, ending with "quickstart: all steps
// ok".

#include <chrono>
#include <iostream>
#include <stdexcept>
#include <string>
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

int checked_sqrt(int x) {
  if (x < 0)
    throw std::domain_error("negative input " + std::to_string(x));
  int r = 0;
  while ((r + 1) * (r + 1) <= x)
    ++r;
  return r;
}
LUMEN_REMOTE(checked_sqrt);

int main(int argc, char** argv) {
  // [taste]
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
  // [/taste]

  // [put]
  auto big = lumen::put(std::vector<float>(1 << 20, 1.0f));
  std::cout << "put " << lumen::get(big).size() << " floats\n";
  // [/put]

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
