// One member of a group in a process of its own, for collective_procs_test:
// joins the cluster at HEAD as a driver, takes rank RANK of GROUP and runs
// MODE, printing what happened, one fact a line.
//   collective_member HEAD TOKEN_FILE GROUP WORLD RANK MODE
// Modes:
//   sweep     every collective against closed forms; "ok", else "FAIL ..."
//   loop      all-reduces 1M floats until the group fails ("looping" once
//             under way, "error: ..." at the end)
//   mismatch  all-reduces 999 floats on rank 1, 1000 elsewhere, then 1000
//             everywhere ("error: ...", then "recovered")
//   join      joins and leaves ("joined", or "error: ..."); waits 2 s for
//             the others
//   again     makes and destroys the group three times ("ok")
//   started   allreduce_start against closed forms and the blocking
//             all-reduce's bits, over 200 operations ("ok", "FAIL ...")
//   loop_started, mismatch_started  as loop and mismatch, with
//             allreduce_start (a mismatch there breaks the group)
//   small_shm run where /dev/shm holds 8 MiB: a kept buffer that fits
//             ("kept 1000: shared", all-reduced right) and one that does
//             not ("kept 3M: own memory"); 500k floats started ("started
//             500k: right"); then 3M floats started, more than /dev/shm
//             holds ("error: ..."; exit 3)
//   stall     all-reduces 1000 floats six times ("calling at FILE:LINE"
//             first); before the sixth ("stalling"), rank 2 computes (sleeps)
//             for 60 s while the others wait in theirs; 8 s timeout

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

#include "closed_forms.hpp"

using namespace lumen::collective;
using lumen::ml::tensor;
using lumen::test::rank_input;

namespace {

int world = 0, rank = 0;
std::string group;

bool matches(const tensor& t, reduce_op op) {
  return lumen::test::matches(t, op, world);
}

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::cout << "FAIL " << what << std::endl;
    ++failures;
  }
}

int sweep() {
  auto n = static_cast<size_t>(world);
  for (size_t length :
       {size_t{0}, size_t{1}, n - 1, size_t{1000}, size_t{1} << 20})
    for (auto op : {reduce_op::sum, reduce_op::product, reduce_op::min,
                    reduce_op::max, reduce_op::average}) {
      if (length == (size_t{1} << 20) && op != reduce_op::sum)
        continue;
      auto before = traffic_of(group);
      auto t = rank_input(rank, length);
      allreduce(t, group, op);
      check(matches(t, op), "allreduce length " + std::to_string(length) +
                              " op " + to_string(op));
      if (length == (size_t{1} << 20))
        check(traffic_of(group).bytes_sent - before.bytes_sent ==
                ring_bytes_per_rank(length, 4, n, static_cast<size_t>(rank)),
              "ring bytes");
    }
  auto t = rank_input(rank, 1000);
  reduce(t, world - 1, group, reduce_op::max);
  check(rank == world - 1 ? matches(t, reduce_op::max)
                          : t == rank_input(rank, 1000),
        "reduce");
  auto b = rank_input(rank, 300000);
  broadcast(b, 1 % world, group);
  check(b == rank_input(1 % world, 300000), "broadcast");
  std::vector<tensor> all;
  allgather(all, rank_input(rank, 5), group);
  check(all.size() == n, "allgather size");
  for (size_t q = 0; q < all.size(); ++q)
    check(all[q] == rank_input(static_cast<int>(q), 5), "allgather");
  std::vector<tensor> parts(n, rank_input(rank, 7));
  tensor mine;
  reducescatter(mine, parts, group, reduce_op::sum);
  check(matches(mine, reduce_op::sum), "reducescatter");
  if (world > 1) {
    if (rank == 0)
      send(rank_input(0, 100), world - 1, group);
    if (rank == world - 1) {
      tensor got({100});
      recv(got, 0, group);
      check(got == rank_input(0, 100), "send/recv");
    }
  }
  // An all-reduce in the background while this process works on.
  auto big = rank_input(rank, 1 << 20);
  auto pending = allreduce_async(big, group, reduce_op::sum);
  double busy = 0;
  for (int i = 0; i < 1000000; ++i)
    busy += i * 0.5;
  check(busy > 0, "busy");
  lumen::get(pending);
  check(matches(big, reduce_op::sum), "allreduce_async");
  barrier(group);
  if (failures == 0)
    std::cout << "ok" << std::endl;
  return failures == 0 ? 0 : 1;
}

int loop(bool started) {
  auto t = rank_input(rank, 1 << 20);
  for (long i = 0;; ++i) {
    if (started)
      allreduce_start(t.data<float>(), t.numel(), group, reduce_op::average)
        .wait();
    else
      allreduce(t, group, reduce_op::average);
    if (i == 3)
      std::cout << "looping" << std::endl;
  }
}

int stall() {
  auto t = rank_input(rank, 1000);
  constexpr int line = __LINE__ + 8;
  std::cout << "calling at collective_member.cpp:" << line << std::endl;
  for (int i = 1; i <= 6; ++i) {
    if (i == 6) {
      std::cout << "stalling" << std::endl;
      if (rank == 2)
        std::this_thread::sleep_for(std::chrono::seconds(60));
    }
    allreduce(t, group);
  }
  return 0;
}

/// Buckets of a gradient, as a training step starts them: each tested
/// while the step works on, all waited for at the end; 70 steps, so that
/// the shared memory's places are used again and again.
int started() {
  const std::vector<size_t> sizes{1000, 33000, 200000};
  const std::vector<reduce_op> ops{reduce_op::average, reduce_op::sum,
                                   reduce_op::max};
  auto before = traffic_of(group);
  for (int step = 0; step < 70; ++step) {
    std::vector<tensor> bufs;
    for (auto n : sizes)
      bufs.push_back(rank_input(rank, n));
    std::vector<started_allreduce> running;
    double busy = 0;
    for (size_t b = 0; b < bufs.size(); ++b) {
      running.push_back(
        allreduce_start(bufs[b].data<float>(), bufs[b].numel(), group, ops[b]));
      for (int i = 0; i < 10000; ++i)
        busy += i * 0.5;
      for (auto& r : running)
        r.test();
    }
    check(busy > 0, "busy");
    for (auto& r : running)
      r.wait();
    for (size_t b = 0; b < bufs.size(); ++b)
      check(matches(bufs[b], ops[b]), "allreduce_start of " +
                                        std::to_string(sizes[b]) + " op " +
                                        to_string(ops[b]));
  }
  // Members on one machine meet in shared memory: no bytes on the wire.
  check(traffic_of(group).bytes_sent == before.bytes_sent,
        "allreduce_start sent bytes on the channels");
  // The same bits as every other member, whatever the path.
  // Of three members, split into shares, the last one's end off a cache
  // line's.
  auto a = rank_input(rank, 50001), b = a;
  allreduce_start(a.data<float>(), a.numel(), group, reduce_op::average).wait();
  std::vector<tensor> everyone;
  allgather(everyone, a, group);
  for (auto& e : everyone)
    check(e == a, "members got different bits");
  allreduce(b, group, reduce_op::average);
  check(matches(b, reduce_op::average), "allreduce after allreduce_start");
  if (failures == 0)
    std::cout << "ok" << std::endl;
  return failures == 0 ? 0 : 1;
}

int small_shm() {
  {
    allreduce_buffer kept{1000, group};
    auto in = rank_input(rank, 1000);
    std::copy_n(in.data<float>(), 1000, kept.data());
    tensor out({1000});
    allreduce_start(kept.data(), out.data<float>(), 1000, group).wait();
    check(matches(out, reduce_op::sum), "kept 1000");
    std::cout << "kept 1000: " << (kept.shared() ? "shared" : "own memory")
              << std::endl;
  }
  {
    // Written whole, as a gradient would be: no page of it may fault.
    allreduce_buffer kept{size_t{3} << 20, group};
    std::fill_n(kept.data(), kept.size(), 1.0f);
    std::cout << "kept 3M: " << (kept.shared() ? "shared" : "own memory")
              << std::endl;
  }
  auto t = rank_input(rank, 500000);
  allreduce_start(t.data<float>(), t.numel(), group).wait();
  check(matches(t, reduce_op::sum), "started 500k");
  std::cout << "started 500k: right" << std::endl;
  auto big = rank_input(rank, size_t{3} << 20);
  allreduce_start(big.data<float>(), big.numel(), group).wait();
  std::cout << "no error" << std::endl;
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: collective_member HEAD TOKEN_FILE GROUP WORLD RANK "
                 "MODE\n";
    return 2;
  }
  lumen::init_options opts;
  opts.address = argv[1];
  opts.token_file = argv[2];
  group = argv[3];
  world = std::stoi(argv[4]);
  rank = std::stoi(argv[5]);
  std::string mode = argv[6];
  lumen::init(opts);
  int rc = 0;
  try {
    set_timeout(group, std::chrono::milliseconds(mode == "join"    ? 2000
                                                 : mode == "stall" ? 8000
                                                                   : 10000));
    if (mode == "again") {
      for (int round = 0; round < 3; ++round) {
        init_group(world, rank, group);
        auto t = rank_input(rank, 1000);
        allreduce(t, group);
        check(matches(t, reduce_op::sum), "round " + std::to_string(round));
        destroy_group(group);
      }
      std::cout << (failures == 0 ? "ok" : "FAIL") << std::endl;
      lumen::shutdown();
      return failures == 0 ? 0 : 1;
    }
    init_group(world, rank, group);
    if (mode == "join") {
      std::cout << "joined" << std::endl;
    } else if (mode == "sweep") {
      rc = sweep();
    } else if (mode == "loop" || mode == "loop_started") {
      rc = loop(mode == "loop_started");
    } else if (mode == "stall") {
      rc = stall();
    } else if (mode == "started") {
      rc = started();
    } else if (mode == "small_shm") {
      rc = small_shm();
    } else if (mode == "mismatch_started") {
      try {
        auto t = rank_input(rank, rank == 1 ? 999 : 1000);
        allreduce_start(t.data<float>(), t.numel(), group).wait();
        std::cout << "no error" << std::endl;
      } catch (const collective_error& e) {
        std::cout << "error: " << e.what() << std::endl;
      }
    } else if (mode == "mismatch") {
      try {
        auto t = rank_input(rank, rank == 1 ? 999 : 1000);
        // Where the call is, for the test to find in the error.
        constexpr int line = __LINE__ + 2;
        std::cout << "calling at collective_member.cpp:" << line << std::endl;
        allreduce(t, group);
        std::cout << "no error" << std::endl;
      } catch (const collective_error& e) {
        std::cout << "error: " << e.what() << std::endl;
      }
      auto t = rank_input(rank, 1000);
      allreduce(t, group);
      if (matches(t, reduce_op::sum))
        std::cout << "recovered" << std::endl;
    }
    destroy_group(group);
  } catch (const collective_error& e) {
    std::cout << "error: " << e.what() << std::endl;
    rc = 3;
    // Leaving serves this member's records a moment longer, to the others
    // gathering them after the same failure.
    if (is_group_initialized(group))
      destroy_group(group);
  }
  lumen::shutdown();
  return rc;
}
