// ml_scratch03b: a ring of peer actors — the reference: 03b_starter.cpp
// with its TODO done.

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
    const size_t n = static_cast<size_t>(link_.world());
    const size_t r = static_cast<size_t>(link_.rank());
    // A step: send chunk `out` to the right, receive chunk `in` from the
    // left. send returns once the right neighbour received: even ranks
    // send first and odd ones receive first, or every rank would wait.
    auto step = [&](size_t out, size_t in) {
      auto o = coll::chunk_of(buf.size(), n, out % n);
      auto i = coll::chunk_of(buf.size(), n, in % n);
      std::vector<float> sent(buf.begin() + o.begin, buf.begin() + o.end);
      std::vector<float> got(i.size());
      if (r % 2 == 0) {
        link_.send_right(sent);
        link_.recv_left(got);
      } else {
        link_.recv_left(got);
        link_.send_right(sent);
      }
      return std::make_pair(i, got);
    };
    // Reduce-scatter: send chunk r - s, add the left's chunk r - s - 1.
    for (size_t s = 0; s + 1 < n; ++s) {
      auto [at, got] = step(r + n - s, r + 2 * n - s - 1);
      for (size_t k = 0; k < got.size(); ++k)
        buf[at.begin + k] += got[k];
    }
    // All-gather: send the finished chunk r + 1 - s, copy chunk r - s.
    for (size_t s = 0; s + 1 < n; ++s) {
      auto [at, got] = step(r + 1 + n - s, r + n - s);
      std::copy(got.begin(), got.end(), buf.begin() + at.begin);
    }
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
