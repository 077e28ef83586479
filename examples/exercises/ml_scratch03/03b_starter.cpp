// ml_scratch03b: a ring of peer actors — your file.
// Part 03a moved the chunks for you; now each rank is an actor on a node
// of its own, and it moves them itself: one chunk a step to its right
// neighbour, one from its left (its ring_link, over the collectives' send
// and recv). Write RingPeer::allreduce (the TODO). --check runs your
// peers on a simulated cluster of 1 Gbit/s links for N = 2..8 under three
// seeds (the sums, the bytes each rank sends, the time against a naive
// gather), then kills one mid-ring; --step shows three ranks, event by
// event.
//
//   lumen exercises check ml_scratch03b

#include "ring_cluster.hpp"

namespace scratch03 {

// A rank of the ring: an actor on its own node, its neighbours reached
// through its ring_link.
class RingPeer {
public:
  RingPeer(int world, int rank)
    : link_(world, rank) {}

  // Every rank's `buf` summed, element by element, on every rank.
  std::vector<float> allreduce(std::vector<float> buf) {
    // TODO(ml_scratch03b): 03a's schedule, with messages: with n ranks and
    // this one's rank r (link_.world(), link_.rank()), n - 1 steps of
    // reduce-scatter (send chunk (r - s) mod n to the right, add the
    // left's chunk (r - s - 1) mod n into yours), then n - 1 of all-gather
    // (send chunk (r + 1 - s) mod n, copy the left's chunk (r - s) mod n
    // over yours). coll::chunk_of(buf.size(), n, c) is chunk c's range;
    // link_.send_right(values) returns once the right neighbour received
    // them, link_.recv_left(values) fills `values` (sized to the chunk).
    return buf;
  }

  uint64_t bytes_sent() {
    return link_.bytes_sent();
  }

private:
  ring_link link_;
};

} // namespace scratch03

LUMEN_ACTOR(scratch03::RingPeer, &scratch03::RingPeer::allreduce,
            &scratch03::RingPeer::bytes_sent);
LUMEN_ACTOR_CTOR(scratch03::RingPeer(int, int));

int main(int argc, char** argv) {
  return scratch03::main_ring<scratch03::RingPeer>(argc, argv);
}
