// Resources and placement groups, as Ray's num_cpus=, resources= and
// placement groups.
//
// Teaches: asking for resources on a task (`.with_num_cpus`,
// `.with_resources`), the error a request no node can ever meet gets at
// once, and reserving bundles of resources together (gang scheduling) to
// run work in them.
//
// Run:   ./.build/examples/basics/resources   (--resources gpu=1 gives this
//        process a GPU, and the second step runs instead of failing)
// Prints "resources: square(9) = 81", the error for gpu=1, "placement
// group: square(5) = 25 in bundle 1 on local" and "resources: all steps ok".

#include <iostream>

#include <lumen/lumen.hpp>

int square(int x) {
  return x * x;
}
LUMEN_REMOTE(square);

int main(int argc, char** argv) {
  lumen::init(argc, argv);
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

  lumen::shutdown();
  std::cout << "resources: all steps ok\n";
}
