// allreduce: four actors average a vector with a collective all-reduce, as
// data-parallel workers average their gradients (ray.util.collective's
// allreduce). Each actor runs on its own thread, joins the group under its
// rank, and reduces its own buffer in place.
//
//   ./build/examples/allreduce

#include <iostream>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

namespace coll = lumen::collective;

// [member]
class Worker {
public:
  explicit Worker(int rank)
    : rank_(rank) {}

  void join(int world_size) {
    coll::init_group(world_size, rank_, "workers");
  }

  // This rank's "gradient" is all rank+1; the average over 4 ranks is 2.5.
  std::vector<float> average(int length) {
    std::vector<float> grad(static_cast<size_t>(length), rank_ + 1.0f);
    coll::allreduce(grad, "workers", coll::reduce_op::average);
    return grad;
  }

private:
  int rank_;
};
LUMEN_ACTOR(Worker, &Worker::join, &Worker::average);
// [/member]

int main(int argc, char** argv) {
  lumen::init(argc, argv);
  // [driver]
  const int world = 4;
  std::vector<lumen::ActorHandle<Worker>> workers;
  for (int rank = 0; rank < world; ++rank)
    workers.push_back(lumen::actor<Worker>(rank).remote());
  for (auto& w : workers)
    lumen::get(w.call(&Worker::join, world));
  // Every member calls the collective; each blocks until all have.
  std::vector<lumen::ObjectRef<std::vector<float>>> results;
  for (auto& w : workers)
    results.push_back(w.call(&Worker::average, 1000));
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
