// A second script in the cluster of a test: finds the named actor the
// first one created ("shared" unless NAME is given), and reports what it
// sees, one fact a line. Without the actor it exits 1 at once, leaving
// lumen::shutdown() to the runtime, as a script that forgets it does.
// With make-detached or make-owned, it makes a Counter(7) named NAME
// instead, placed where Lumen puts it, prints its node and ends. With
// hold-group, it reserves a placement group of one bundle {gpu: 1}, prints
// "group ready on NODE" and waits to be killed.
//   second_driver HEAD_ADDRESS TOKEN_FILE
//                 [NAME [make-detached|make-owned|hold-group]]

#include <chrono>
#include <iostream>
#include <thread>

#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>

#include "cluster_job.hpp"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::cerr << "usage: second_driver HEAD_ADDRESS TOKEN_FILE [NAME "
                 "[make-detached|make-owned|hold-group]]\n";
    return 2;
  }
  std::string name = argc >= 4 ? argv[3] : "shared";
  lumen::init_options opts;
  opts.address = argv[1];
  opts.token_file = argv[2];
  lumen::init(opts);
  if (argc == 5 && std::string{argv[4]} == "hold-group") {
    lumen::placement_group pg({{{"gpu", 1}}});
    lumen::get(pg.ready());
    std::cout << "group ready on " << pg.bundle_node(0) << std::endl;
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (argc == 5) {
    auto made = lumen::actor<Counter>(7)
                  .with_name(name)
                  .with_lifetime(std::string{argv[4]} == "make-detached"
                                   ? lumen::lifetime::detached
                                   : lumen::lifetime::owned)
                  .remote();
    std::cout << "made on " << lumen::get(made.call(&Counter::node)) << "\n";
    lumen::shutdown();
    return 0;
  }
  auto shared = lumen::get_actor<Counter>(name);
  if (!shared) {
    std::cout << name << ": missing\n";
    return 1;
  }
  std::cout << "node=" << lumen::get(shared->call(&Counter::node)) << "\n";
  std::cout << "value=" << lumen::get(shared->call(&Counter::add, 5)) << "\n";
  try {
    lumen::actor<Counter>(0).on_node("node-2").with_name(name).remote();
    std::cout << "clash accepted\n";
  } catch (const lumen::usage_error& e) {
    std::cout << "clash refused: " << e.what() << "\n";
  }
  std::cout << (lumen::get_actor<Counter>("nobody") ? "nobody found\n"
                                                    : "nobody missing\n");
  lumen::shutdown();
}
