// allreduce: four actors average a vector with a collective all-reduce, as
// data-parallel workers average their gradients (ray.util.collective's
// allreduce). The driver declares the group, as Ray's
// create_collective_group does; each actor reduces its own buffer in place.
//
// Alone, the actors are threads of this process and read each other's
// buffers:
//   ./.build/examples/ml/allreduce
// In a cluster, they are spread over its nodes and meet through the head;
// their buffers go round a ring of direct connections:
//   ./.build/examples/ml/allreduce start --head --block        # machine A
//   ./.build/examples/ml/allreduce start --address A:6380 --block   # machine B
//   ./.build/examples/ml/allreduce --address=A:6380
// Prints where each member runs, each rank's result (2.5 ... 2.5) and
// "allreduce: all steps ok"; with --trace=FILE, a timeline of the ring's
// steps in every process.

#include <iostream>
#include <vector>

#include <lumen/cli.hpp>
#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

namespace coll = lumen::collective;

// [member]
// No init_group here: the driver declares the group (create_group), and
// each member joins on its first use of it, under the rank it was given.
class Worker {
public:
  // Says where this member runs and how the members meet (threads of one
  // process, or processes); returns once every member joined.
  std::string where() {
    bool threads = coll::backend_of("workers") == coll::backend::threads;
    return lumen::this_node_id() + (threads ? " (threads)" : " (processes)");
  }

  // This rank's "gradient" is all rank+1; the average over 4 ranks is 2.5.
  std::vector<float> average(int length) {
    float rank = static_cast<float>(coll::get_rank("workers"));
    std::vector<float> grad(static_cast<size_t>(length), rank + 1.0f);
    coll::allreduce(grad, "workers", coll::reduce_op::average);
    return grad;
  }
};
LUMEN_ACTOR(Worker, &Worker::where, &Worker::average);
// [/member]

int main(int argc, char** argv) {
  // `allreduce start ...` makes this program a head or a node.
  if (argc > 1 && std::string{argv[1]} == "start")
    return lumen::cli_main(argc, argv);
  lumen::init(argc, argv);
  bool cluster = lumen::this_node_id() != "local";
  // [driver]
  const int world = 4;
  std::vector<lumen::ActorHandle<Worker>> workers;
  for (int rank = 0; rank < world; ++rank) {
    auto w = lumen::actor<Worker>();
    workers.push_back(cluster ? w.spread().remote() : w.remote());
  }
  // Ray's create_collective_group: workers[r] is rank r of "workers".
  coll::create_group(workers, "workers");
  // Every member joins before any can go on: ask all, then wait.
  std::vector<lumen::ObjectRef<std::string>> joined;
  for (auto& w : workers)
    joined.push_back(w.call(&Worker::where));
  for (auto& where : lumen::get(joined))
    std::cout << "member on " << where << "\n";
  // Every member calls the collective; each blocks until all have. Half
  // a million floats (2 MiB, a layer's gradient) go round the ring.
  std::vector<lumen::ObjectRef<std::vector<float>>> results;
  for (auto& w : workers)
    results.push_back(w.call(&Worker::average, 1 << 19));
  for (auto& r : lumen::get(results))
    std::cout << "rank result: " << r.front() << " ... " << r.back() << "\n";
  // [/driver]
  bool ok = true;
  for (auto& r : lumen::get(results))
    for (float x : r)
      ok = ok && x == 2.5f;
  lumen::shutdown();
  std::cout << (ok ? "allreduce: all steps ok" : "allreduce: WRONG") << "\n";
  return ok ? 0 : 1;
}
