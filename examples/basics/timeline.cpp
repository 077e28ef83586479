// Timeline: where the time of a run went, as `ray timeline` shows it.
//
// Teaches: `--trace FILE` (any Lumen program takes it), which writes a
// timeline of the run at lumen::shutdown(): a row per actor and task
// thread, a span for each task and method call with an arrow from where it
// was submitted; and a span of your own (`lumen::trace::span`) naming a
// step around them.
//
// Run:   ./.build/examples/basics/timeline --trace timeline.json
// then open timeline.json at https://ui.perfetto.dev or chrome://tracing.
// Prints "sum of ten squares = 285", "counter = 45", where the timeline
// went, and "timeline: all steps ok".

#include <iostream>
#include <vector>

#include <lumen/lumen.hpp>

int square(int x) {
  return x * x;
}
LUMEN_REMOTE(square);

class Counter {
public:
  int add(int d) {
    return n_ += d;
  }

private:
  int n_ = 0;
};
LUMEN_ACTOR(Counter, &Counter::add);

int main(int argc, char** argv) {
  lumen::init(argc, argv); // --trace FILE: record this run's timeline
  // [trace]
  // With --trace FILE, every task and method call is a span on its
  // thread's row, with an arrow from where it was submitted; a span of
  // your own names a step around them.
  {
    lumen::trace::span step{"ten squares", "timeline"};
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
  {
    lumen::trace::span step{"ten calls", "timeline"};
    auto counter = lumen::actor<Counter>().remote();
    lumen::ObjectRef<int> last;
    for (int i = 0; i < 10; ++i)
      last = counter.call(&Counter::add, i);
    std::cout << "counter = " << lumen::get(last) << "\n";
  }
  lumen::shutdown(); // writes the timeline
  std::cout << "timeline: all steps ok\n";
}
