#define BOOST_TEST_MODULE transport
#include <boost/test/unit_test.hpp>

// One algorithm, two transports: every all-reduce algorithm and the other
// collectives run between members that are threads of this process, once
// over the threads transport (mailboxes in memory) and once over the net
// transport (channels on loopback), and must give the same bits on both
// and on every rank. The inputs are random floats, whose sums depend on
// the order of the additions: equal bits mean the algorithm did the same
// work in the same order, whichever transport moved the bytes.

#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

#include "collective/algorithms/algorithms.hpp"
#include "collective/net/net_group.hpp"
#include "collective/threads/threads_transport.hpp"
#include "runtime_fixture.hpp"

using namespace lumen::collective;
using namespace lumen::collective::detail;
using lumen::ml::dtype;
using lumen::ml::tensor;

// The net transport's members meet through the runtime's channels.
using lumen::test::local_runtime;
BOOST_TEST_GLOBAL_FIXTURE(local_runtime);

namespace {

constexpr auto timeout = std::chrono::milliseconds(20000);

std::vector<float> input(int rank, size_t length) {
  std::mt19937 gen{static_cast<unsigned>(rank + 1)};
  std::uniform_real_distribution<float> dist{-1.0f, 1.0f};
  std::vector<float> v(length);
  for (auto& x : v)
    x = dist(gen) * static_cast<float>(1 << (rank % 5));
  return v;
}

using member_body = std::function<void(transport&, int rank)>;
using make_transport = std::function<std::unique_ptr<transport>(int rank)>;

int next_group = 0;

/// Runs `body` on `world` threads, each a member over `make`'s transport;
/// returns what each member threw (empty: nothing).
std::vector<std::string> on_members(int world, const make_transport& make,
                                    const member_body& body) {
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto t = make(r);
        body(*t, r);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads)
    t.join();
  return errors;
}

/// The two transports for a fresh group of `world` members.
std::vector<std::pair<const char*, make_transport>> transports(int world) {
  auto name = "t" + std::to_string(next_group++);
  auto group = std::make_shared<local_group>(name, world);
  group->set_timeout(timeout);
  for (int r = 0; r < world; ++r)
    group->join(r);
  return {
    {"threads",
     [group](int r) { return std::make_unique<threads_transport>(group, r); }},
    {"net", [name, world](int r) {
       return std::make_unique<net_group>(name, world, r, timeout);
     }}};
}

/// Runs `body` over both transports and checks that each rank ends with
/// the same bytes in `out` on both, and that neither failed.
void same_on_both(int world, const std::string& what,
                  const std::function<std::vector<char>(transport&, int)>& body,
                  bool same_on_every_rank) {
  std::vector<std::vector<std::vector<char>>> results;
  for (auto& [kind, make] : transports(world)) {
    std::vector<std::vector<char>> out(static_cast<size_t>(world));
    auto errors = on_members(world, make, [&](transport& t, int r) {
      out[static_cast<size_t>(r)] = body(t, r);
    });
    for (auto& e : errors)
      BOOST_TEST(e.empty(), what << " over " << kind << ": " << e);
    results.push_back(std::move(out));
  }
  for (size_t r = 0; r < static_cast<size_t>(world); ++r) {
    BOOST_TEST((results[0][r] == results[1][r]),
               what << ": rank " << r << " differs between the transports");
    if (same_on_every_rank)
      BOOST_TEST((results[0][r] == results[0][0]),
                 what << ": rank " << r << " differs from rank 0");
  }
}

std::vector<char> bytes_of(const std::vector<float>& v) {
  auto p = reinterpret_cast<const char*>(v.data());
  return {p, p + v.size() * sizeof(float)};
}

std::vector<char> bytes_of(const tensor& t) {
  auto p = static_cast<const char*>(t.raw());
  return {p, p + t.nbytes()};
}

} // namespace

BOOST_AUTO_TEST_SUITE(over_transports)

BOOST_AUTO_TEST_CASE(each_allreduce_gives_the_same_bits_over_both_transports) {
  using algo = allreduce_algorithm;
  for (auto a : {algo::ring, algo::halving_doubling, algo::recursive_doubling,
                 algo::direct, algo::naive})
    for (int n : {1, 2, 3, 4})
      for (size_t length :
           {size_t{0}, size_t{1}, size_t{1001}, size_t{300001}}) {
        bool pairwise =
          a == algo::halving_doubling || a == algo::recursive_doubling;
        if (pairwise && (n & (n - 1)) != 0)
          continue;
        for (auto op : {reduce_op::sum, reduce_op::average, reduce_op::max})
          same_on_both(
            n,
            std::string{to_string(a)} + " n=" + std::to_string(n) +
              " length=" + std::to_string(length) + " " + to_string(op),
            [&](transport& t, int r) {
              auto v = input(r, length);
              run_allreduce(t, a, reinterpret_cast<char*>(v.data()),
                            dtype::float32, v.size(), op);
              return bytes_of(v);
            },
            true);
      }
}

BOOST_AUTO_TEST_CASE(the_other_collectives_give_the_same_bits_on_both) {
  const int n = 3;
  const size_t length = 200001;
  same_on_both(
    n, "broadcast",
    [&](transport& t, int r) {
      auto v = input(r, length);
      run_broadcast(t, reinterpret_cast<char*>(v.data()), dtype::float32,
                    v.size(), 1);
      return bytes_of(v);
    },
    true);
  same_on_both(
    n, "reduce",
    [&](transport& t, int r) {
      auto v = input(r, length);
      run_reduce(t, allreduce_algorithm::automatic,
                 reinterpret_cast<char*>(v.data()), dtype::float32, v.size(), 2,
                 reduce_op::sum);
      return bytes_of(v);
    },
    false);
  same_on_both(
    n, "allgather",
    [&](transport& t, int r) {
      auto in = tensor::from(input(r, length));
      std::vector<tensor> out;
      run_allgather(t, out, in);
      std::vector<char> all;
      for (auto& x : out) {
        auto b = bytes_of(x);
        all.insert(all.end(), b.begin(), b.end());
      }
      return all;
    },
    true);
  same_on_both(
    n, "reducescatter",
    [&](transport& t, int r) {
      std::vector<tensor> in;
      for (int q = 0; q < n; ++q)
        in.push_back(tensor::from(input(r * n + q, length)));
      tensor out;
      run_reducescatter(t, out, in, reduce_op::sum);
      return bytes_of(out);
    },
    false);
  same_on_both(
    n, "send and recv",
    [&](transport& t, int r) {
      auto v = input(r, length);
      run_barrier(t);
      if (r == 0)
        run_send(t, reinterpret_cast<const char*>(v.data()), dtype::float32,
                 v.size(), 2);
      if (r == 2)
        run_recv(t, reinterpret_cast<char*>(v.data()), dtype::float32, v.size(),
                 0);
      return bytes_of(v);
    },
    false);
}

BOOST_AUTO_TEST_CASE(a_disagreement_fails_every_member_alike_on_both) {
  const int n = 3;
  for (auto& [kind, make] : transports(n)) {
    auto errors = on_members(n, make, [](transport& t, int r) {
      // Rank 2 passes one element more than the others; each member's
      // operation is counted and placed as op_span does.
      auto v = input(r, r == 2 ? 11 : 10);
      t.begin_call(lumen::collective::call_site::here("train.cpp", 42),
                   "allreduce", 4000);
      run_allreduce(t, allreduce_algorithm::ring,
                    reinterpret_cast<char*>(v.data()), dtype::float32, v.size(),
                    reduce_op::sum);
    });
    for (auto& e : errors) {
      BOOST_TEST(e.find("every rank must pass the same dtype and length") !=
                   std::string::npos,
                 kind << ": " << e);
      BOOST_TEST(e.find("rank 2 called at train.cpp:42 as operation 1") !=
                   std::string::npos,
                 kind << ": " << e);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
