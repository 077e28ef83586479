// A bug that shows only in some orders, found by running many seeds.
//
// Teaches: a check-then-act across two actor calls is a race; on a real
// cluster it fails once in a while, in a simulated one it fails for some
// seeds and for those seeds every time. `lumen sim` runs the program once
// per seed and names the seeds that fail; any one of them, run alone,
// fails the same way, ready for a debugger.
//
// Run:   ./.build/bin/lumen sim ./.build/examples/basics/planted_race
//          --seeds=1..300 -- --sim-link=1ms,1GB --sim-jitter=1ms
// Prints each failing seed with the program's last lines, then
// "300 seeds (1..300): N failed; run one alone with ...". One seed alone:
//        ./.build/examples/basics/planted_race --simulate=SEED
//          --sim-link=1ms,1GB --sim-jitter=1ms

#include <chrono>
#include <iostream>
#include <string>

#include <lumen/lumen.hpp>
#include <lumen/sim.hpp>

class Shelf {
public:
  int stock() const {
    return stock_;
  }
  void take() {
    --stock_;
  }

private:
  int stock_ = 1;
};
LUMEN_ACTOR(Shelf, &Shelf::stock, &Shelf::take);

// [check-then-act]
// The bug: the check and the act are two calls, and another buyer's
// check can come in between them.
bool buy(std::string shelf_name) {
  auto shelf = *lumen::get_actor<Shelf>(shelf_name);
  if (lumen::get(shelf.call(&Shelf::stock)) < 1)
    return false;
  lumen::get(shelf.call(&Shelf::take));
  return true;
}
LUMEN_REMOTE(buy);
// [/check-then-act]

int main(int argc, char** argv) {
  lumen::init(argc, argv);
  if (!lumen::sim::active()) {
    std::cerr << "run me with --simulate[=SEED], or many seeds through "
                 "`lumen sim`\n";
    lumen::shutdown();
    return 2;
  }
  auto shelf = lumen::actor<Shelf>().with_name("shelf").remote();
  // Two buyers on two nodes, the second a little later: most orders let
  // the first finish before the second looks.
  auto first = lumen::task(buy).on_node("node-1").remote("shelf");
  lumen::sleep_for(std::chrono::microseconds(4500));
  auto second = lumen::task(buy).on_node("node-2").remote("shelf");
  int sold = lumen::get(first) + lumen::get(second);
  int left = lumen::get(shelf.call(&Shelf::stock));
  std::cout << "sold " << sold << ", " << left << " left\n";
  lumen::shutdown();
  if (left < 0) {
    std::cout << "planted_race: oversold: both buyers saw the last item\n";
    return 1;
  }
  std::cout << "planted_race: all steps ok\n";
  return 0;
}
