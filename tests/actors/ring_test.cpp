#define BOOST_TEST_MODULE ring
#include <boost/test/unit_test.hpp>

// The ring schedule and its in-memory simulation, against closed forms:
// rank r holds values whose sum, product, min and max are known.

#include <set>

#include <lumen/collective/ring.hpp>

using namespace lumen::collective;

namespace {

/// Rank r's element i: small integers, exact in float under every op.
float input(size_t r, size_t i) {
  return static_cast<float>((r + 1) * (i % 3 + 1));
}

float expected(reduce_op op, size_t n, size_t i) {
  float acc = input(0, i);
  for (size_t r = 1; r < n; ++r) {
    float x = input(r, i);
    switch (op) {
      case reduce_op::sum:
      case reduce_op::average:
        acc += x;
        break;
      case reduce_op::product:
        acc *= x;
        break;
      case reduce_op::min:
        acc = std::min(acc, x);
        break;
      case reduce_op::max:
        acc = std::max(acc, x);
        break;
    }
  }
  return op == reduce_op::average ? acc / static_cast<float>(n) : acc;
}

} // namespace

BOOST_AUTO_TEST_SUITE(ring)

BOOST_AUTO_TEST_CASE(chunks_cover_the_buffer_and_differ_by_at_most_one) {
  for (size_t length : {0u, 1u, 7u, 1000u})
    for (size_t parts : {1u, 3u, 4u, 7u}) {
      size_t covered = 0;
      for (size_t c = 0; c < parts; ++c) {
        auto ch = chunk_of(length, parts, c);
        BOOST_TEST(ch.begin == covered);
        BOOST_TEST(ch.size() <= length / parts + 1);
        BOOST_TEST(ch.size() >= length / parts);
        covered = ch.end;
      }
      BOOST_TEST(covered == length);
    }
}

BOOST_AUTO_TEST_CASE(each_step_passes_every_chunk_once_around_the_ring) {
  for (size_t n : {2u, 3u, 4u, 7u})
    for (auto phase : {ring_phase::reduce_scatter, ring_phase::all_gather})
      for (size_t s = 0; s + 1 < n; ++s) {
        std::set<size_t> sent;
        for (size_t r = 0; r < n; ++r) {
          auto st = ring_schedule(phase, r, n, s);
          sent.insert(st.send_chunk);
          // What r receives is what r-1 sends.
          BOOST_TEST(st.recv_chunk ==
                     ring_schedule(phase, (r + n - 1) % n, n, s).send_chunk);
        }
        BOOST_TEST(sent.size() == n);
      }
}

BOOST_AUTO_TEST_CASE(the_simulated_ring_matches_the_closed_form) {
  for (size_t n : {1u, 2u, 3u, 4u, 7u})
    for (size_t length :
         {size_t{0}, size_t{1}, n - 1, size_t{1000}, size_t{1} << 20})
      for (auto op : {reduce_op::sum, reduce_op::product, reduce_op::min,
                      reduce_op::max, reduce_op::average}) {
        if (length == (size_t{1} << 20) && n > 4)
          continue; // large enough already at n = 4
        std::vector<std::vector<float>> bufs(n, std::vector<float>(length));
        for (size_t r = 0; r < n; ++r)
          for (size_t i = 0; i < length; ++i)
            bufs[r][i] = input(r, i);
        size_t steps = 0;
        auto sent =
          simulate_allreduce(bufs, op, [&](auto&, auto&) { ++steps; });
        BOOST_TEST(steps == 2 * (n - 1));
        bool ok = true;
        for (size_t r = 0; r < n && ok; ++r)
          for (size_t i = 0; i < length && ok; ++i)
            ok = bufs[r][i] == expected(op, n, i);
        BOOST_TEST(ok, "n=" << n << " length=" << length
                            << " op=" << to_string(op));
        for (size_t r = 0; r < n; ++r) {
          BOOST_TEST(sent[r] == ring_bytes_per_rank(length, 4, n, r));
          // 2·S·(N-1)/N exactly when N divides the length.
          if (length % n == 0)
            BOOST_TEST(sent[r] == 2 * length * 4 * (n - 1) / n);
        }
      }
}

BOOST_AUTO_TEST_SUITE_END()
