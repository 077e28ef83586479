// ring_peers: a driver places four ring peers (typed CAF actors, spawned by
// name) on the cluster's nodes, declares a collective group over them
// (Ray's create_collective_group) and sums a tensor across them with
// messages: the peers do the ring all-reduce between themselves.
//
// Alone, the peers are threads of this process:
//   ./.build/examples/ml/ring_peers
// In a cluster, one peer a node in turn, their tensors going round a ring
// of direct connections:
//   ./.build/examples/ml/ring_peers start --head --block            # A
//   ./.build/examples/ml/ring_peers start --address A:6380 --block  # B
//   ./.build/examples/ml/ring_peers --address=A:6380
// Prints each rank's result (10 ... 10), the node of each peer and
// "ring_peers: all steps ok".

#include <iostream>
#include <string>
#include <vector>

#include <lumen/caf_interop.hpp>
#include <lumen/cli.hpp>
#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

namespace coll = lumen::collective;
using lumen::ml::tensor;

int main(int argc, char** argv) {
  // `ring_peers start ...` makes this program a head or a node that can
  // host ring peers.
  if (argc > 1 && std::string{argv[1]} == "start")
    return lumen::cli_main(argc, argv);
  lumen::init(argc, argv);
  std::vector<std::string> places;
  for (auto& n : lumen::nodes())
    if (n.alive)
      places.push_back(n.id);
  if (places.empty())
    places.push_back(lumen::this_node_id());
  // [peers]
  const int world = 4;
  std::vector<coll::ring_peer> peers;
  for (int rank = 0; rank < world; ++rank)
    peers.push_back(coll::spawn_ring_peer(places[rank % places.size()]));
  coll::create_group(peers, "sums");
  // Rank r's tensor is all r+1; the sum over four ranks is 10 everywhere.
  std::vector<lumen::ObjectRef<tensor>> sums;
  for (int rank = 0; rank < world; ++rank) {
    auto t = tensor::from(std::vector<float>(1000, rank + 1.0f));
    sums.push_back(lumen::call(peers[rank], coll::allreduce_atom::value, "sums",
                               t, coll::reduce_op::sum));
  }
  for (auto& s : lumen::get(sums))
    std::cout << "rank result: " << s.data<float>()[0] << " ... "
              << s.data<float>()[s.numel() - 1] << "\n";
  coll::destroy_group(peers, "sums");
  // [/peers]
  bool ok = true;
  for (auto& s : lumen::get(sums))
    for (float x : s.to_vector<float>())
      ok = ok && x == 10.0f;
  for (size_t rank = 0; rank < peers.size(); ++rank)
    std::cout << "rank " << rank << " on " << places[rank % places.size()]
              << "\n";
  lumen::shutdown();
  std::cout << (ok ? "ring_peers: all steps ok" : "ring_peers: WRONG") << "\n";
  return ok ? 0 : 1;
}
