#define BOOST_TEST_MODULE sim
#include <boost/test/unit_test.hpp>

// The simulations the browser playground runs, checked natively: the ring
// against its closed form, a recorded exercise run replayed against the
// reference, and the parameter server's async mode with and without the
// staleness fix.

#include <cmath>
#include <cstdio>
#include <string>

#include <lumen/ml/sim.hpp>

using namespace lumen::ml;
using lumen::collective::ring_bytes_per_rank;
using lumen::collective::ring_phase;

namespace {

std::string output_of(const std::string& command) {
  std::string out;
  auto* p = ::popen(command.c_str(), "r");
  BOOST_REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
    out.append(buf, n);
  ::pclose(p);
  return out;
}

float last_loss(const sim::ps_sim& s) {
  return s.losses().back().loss;
}

} // namespace

BOOST_AUTO_TEST_CASE(the_scheduler_runs_events_in_time_then_in_order) {
  sim::scheduler clock{1};
  std::string order;
  clock.after(2, [&] { order += "c"; });
  clock.after(1, [&] { order += "a"; });
  clock.after(1, [&] { order += "b"; });
  while (clock.run_next())
    ;
  BOOST_TEST(order == "abc");
  BOOST_TEST(clock.now() == 2.0);
}

BOOST_AUTO_TEST_CASE(the_ring_ends_with_the_closed_form_on_every_rank) {
  for (size_t n : {2, 3, 4, 7})
    for (size_t length : {1, 8, 13}) {
      sim::ring_config cfg;
      cfg.ranks = n;
      cfg.length = length;
      cfg.seed = 5;
      auto run = sim::run_ring(cfg);
      BOOST_REQUIRE_EQUAL(run.frames.size(), 2 * (n - 1));
      for (size_t i = 0; i < length; ++i) {
        float sum = 0;
        for (size_t r = 0; r < n; ++r)
          sum += sim::ring_input(5, r, i);
        BOOST_TEST(run.expected[i] == sum);
      }
      auto& last = run.frames.back();
      uint64_t all = (uint64_t{1} << n) - 1;
      for (size_t r = 0; r < n; ++r) {
        BOOST_TEST(last.buffers[r] == run.expected,
                   boost::test_tools::per_element());
        BOOST_TEST(last.bytes_sent[r] ==
                   ring_bytes_per_rank(length, sizeof(float), n, r));
        for (size_t c = 0; c < n; ++c)
          if (lumen::collective::chunk_of(length, n, c).size() > 0)
            BOOST_TEST(last.holders[r][c] == all);
      }
      // After reduce-scatter rank r holds chunk r+1 from every rank.
      auto& scattered = run.frames[n - 2];
      BOOST_TEST((scattered.phase == ring_phase::reduce_scatter));
      for (size_t r = 0; r < n; ++r)
        if (lumen::collective::chunk_of(length, n, (r + 1) % n).size() > 0)
          BOOST_TEST(scattered.holders[r][(r + 1) % n] == all);
      BOOST_TEST(run.naive.root_bytes == (n - 1) * length * sizeof(float));
    }
}

BOOST_AUTO_TEST_CASE(seed_zero_gives_the_exercise_inputs) {
  BOOST_TEST(sim::ring_input(0, 0, 0) == 10.0f);
  BOOST_TEST(sim::ring_input(0, 3, 9) == 42.0f);
}

BOOST_AUTO_TEST_CASE(bad_ring_sizes_are_refused_with_the_fix) {
  sim::ring_config cfg;
  cfg.ranks = 1;
  BOOST_CHECK_EXCEPTION(
    sim::run_ring(cfg), lumen::usage_error, [](const lumen::usage_error& e) {
      return std::string{e.what()}.find("give 2 to 64") != std::string::npos;
    });
}

#ifdef LUMEN_SCRATCH03_SOLUTION
BOOST_AUTO_TEST_CASE(a_native_run_of_the_reference_replays_as_a_match) {
  auto out = output_of(std::string{LUMEN_SCRATCH03_SOLUTION} + " --step=json");
  auto v = sim::replay_ring(out);
  BOOST_TEST(v.matches, v.what);
  BOOST_TEST(v.steps == 6u);
}

BOOST_AUTO_TEST_CASE(the_untouched_starter_replays_with_its_first_difference) {
  auto out = output_of(std::string{LUMEN_SCRATCH03_STARTER} + " --step=json");
  auto v = sim::replay_ring(out);
  BOOST_TEST(!v.matches);
  BOOST_TEST(v.first_bad >= 1u);
  BOOST_TEST(v.what.find("step " + std::to_string(v.first_bad)) !=
             std::string::npos);
}
#endif

BOOST_AUTO_TEST_CASE(a_damaged_replay_file_is_named_as_such) {
  auto v = sim::replay_ring("{\"step\": 1}\nnot json\n");
  BOOST_TEST(!v.matches);
  BOOST_TEST(v.what.find("--step=json") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(async_without_the_staleness_fix_diverges_with_it_falls) {
  sim::ps_sim_config cfg;
  cfg.workers = 8;
  cfg.lr = 0.3f;
  cfg.staleness_lr = false;
  sim::ps_sim off{cfg};
  off.run_to(300);
  cfg.staleness_lr = true;
  sim::ps_sim on{cfg};
  on.run_to(300);
  BOOST_TEST(!(last_loss(off) < 100 * off.initial_loss()));
  BOOST_TEST(off.diverged());
  BOOST_TEST(last_loss(on) < 0.01f * on.initial_loss());
  BOOST_TEST(!on.diverged());
  BOOST_TEST(on.server().stats().staleness.rbegin()->first >= 2u);
}

BOOST_AUTO_TEST_CASE(a_run_is_the_same_for_the_same_seed) {
  sim::ps_sim_config cfg;
  sim::ps_sim a{cfg}, b{cfg};
  a.run_to(50);
  b.run_to(50);
  BOOST_REQUIRE_EQUAL(a.losses().size(), b.losses().size());
  for (size_t i = 0; i < a.losses().size(); ++i) {
    BOOST_TEST(a.losses()[i].loss == b.losses()[i].loss);
    BOOST_TEST(a.losses()[i].time_ms == b.losses()[i].time_ms);
  }
}

BOOST_AUTO_TEST_CASE(sync_steps_wait_for_every_worker_and_backups_drop_late) {
  sim::ps_sim_config cfg;
  cfg.mode = ps_mode::sync;
  cfg.workers = 4;
  cfg.straggler = 5;
  sim::ps_sim all{cfg};
  all.run_to(20);
  BOOST_TEST(all.server().stats().applied == 4 * all.server().version());
  BOOST_TEST(all.workers()[0].dropped == 0u);
  cfg.backup = 1;
  sim::ps_sim backup{cfg};
  backup.run_to(20);
  BOOST_TEST(backup.workers()[0].dropped > 0u);
  // Without waiting for the straggler, 20 steps take less virtual time.
  BOOST_TEST(backup.now_ms() < all.now_ms());
  BOOST_TEST(last_loss(backup) < backup.initial_loss());
}

BOOST_AUTO_TEST_CASE(compressed_gradients_still_train) {
  sim::ps_sim_config cfg;
  cfg.compression = codec::int8;
  sim::ps_sim s{cfg};
  s.run_to(200);
  BOOST_TEST(last_loss(s) < 0.05f * s.initial_loss());
}

BOOST_AUTO_TEST_CASE(each_worker_s_timeline_is_a_gapless_run_of_states) {
  sim::ps_sim_config cfg;
  cfg.mode = ps_mode::sync;
  cfg.straggler = 3;
  sim::ps_sim s{cfg};
  s.run_to(30);
  std::vector<double> end(cfg.workers, 0.0);
  size_t waits = 0;
  for (auto& seg : s.segments()) {
    BOOST_TEST(seg.start_ms == end[seg.worker]);
    BOOST_TEST(seg.end_ms > seg.start_ms);
    end[seg.worker] = seg.end_ms;
    waits += seg.state == sim::worker_state::waiting && seg.worker != 0;
  }
  // The fast workers wait for the straggler at every step's barrier.
  BOOST_TEST(waits >= 20u);
}

BOOST_AUTO_TEST_CASE(data_parallel_replicas_stay_identical_and_learn) {
  sim::ddp_sim_config cfg;
  sim::ddp_sim s{cfg};
  BOOST_TEST(s.buckets().size() >= 2u);
  float first = s.step().loss;
  for (int i = 0; i < 29; ++i)
    BOOST_TEST(s.step().drift == 0.0f);
  BOOST_TEST(s.history().back().loss < 0.2f * first);
  for (auto& p : s.replicas())
    BOOST_TEST(p == s.replicas()[0]);
}

BOOST_AUTO_TEST_CASE(buckets_all_reduced_during_backward_shorten_the_step) {
  for (bool overlap : {true, false}) {
    sim::ddp_sim_config cfg;
    cfg.overlap = overlap;
    sim::ddp_sim s{cfg};
    auto& r = s.step();
    bool during = false;
    for (auto& span : r.spans)
      if (span.lane == 1 && span.start_ms < r.backward_end_ms)
        during = true;
    BOOST_TEST(during == overlap);
    if (overlap)
      BOOST_TEST(r.end_ms - r.start_ms < 0.9 * r.serial_ms);
    else
      BOOST_TEST(r.end_ms - r.start_ms == r.serial_ms,
                 boost::test_tools::tolerance(1e-9));
  }
}

BOOST_AUTO_TEST_CASE(a_bucket_left_out_makes_replicas_drift_until_rebroadcast) {
  sim::ddp_sim_config cfg;
  cfg.skip_a_bucket = true;
  sim::ddp_sim drifting{cfg};
  for (int i = 0; i < 20; ++i)
    drifting.step();
  BOOST_TEST(drifting.history()[0].drift > 0.0f);
  BOOST_TEST(drifting.history().back().drift > drifting.history()[0].drift);
  cfg.rebroadcast_every = 5;
  sim::ddp_sim mended{cfg};
  for (int i = 0; i < 20; ++i) {
    auto& r = mended.step();
    BOOST_TEST(r.rebroadcast == (r.step % 5 == 0));
    if (r.rebroadcast)
      BOOST_TEST(r.drift == 0.0f);
  }
}

BOOST_AUTO_TEST_CASE(a_recorded_run_is_compared_field_by_field) {
  std::string reference = "{\"step\": 1, \"loss\": 0.5, \"w\": [1, 2]}\n"
                          "{\"step\": 2, \"loss\": 0.25, \"w\": [1, 3]}\n";
  BOOST_TEST(sim::compare_runs(reference, reference).matches);
  // Rounding of another build is not a difference.
  auto close = sim::compare_runs(
    reference, "{\"step\": 1, \"loss\": 0.50001, \"w\": [1, 2]}\n"
               "{\"step\": 2, \"loss\": 0.25, \"w\": [1, 3]}\n");
  BOOST_TEST(close.matches, close.what);
  auto off = sim::compare_runs(
    reference, "{\"step\": 1, \"loss\": 0.5, \"w\": [1, 2]}\n"
               "{\"step\": 2, \"loss\": 0.25, \"w\": [1, 4]}\n");
  BOOST_TEST(!off.matches);
  BOOST_TEST(off.first_bad == 2u);
  BOOST_TEST(off.what == "step 2: w[1] is 4, the reference has 3");
  auto short_run = sim::compare_runs(reference, "{\"step\": 1, \"loss\": 0.5, "
                                                "\"w\": [1, 2]}\n");
  BOOST_TEST(short_run.what.find("1 steps, the reference 2") !=
             std::string::npos);
}
