// runtime_bench: Lumen's overhead, measured like Ray's `ray microbenchmark`,
// next to raw CAF messaging in the same actor system and the same run.
//
//   ./.build/tests/bench/runtime_bench [--json] [--reps=N] [--smoke]
//
// Sync figures wait for each result before the next call; async figures
// submit a batch, then wait for all of it. The CAF baselines are a chain of
// event-based request/then round trips and a blocking scoped_actor
// request/receive loop against the same kind of echo actor. The traced_
// figures are calls with a trace recording (--trace), each next to the
// same calls untraced, each in a fresh runtime.

#include <stdlib.h>

#include <filesystem>
#include <future>
#include <numeric>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include <lumen/caf_interop.hpp>
#include <lumen/lumen.hpp>
#include <lumen/util/huge_pages.hpp>

#include "bench_report.hpp"

namespace {

int echo_task(int x) {
  return x;
}
LUMEN_REMOTE(echo_task);

class Echo {
public:
  int echo(int x) {
    return x;
  }
};
LUMEN_ACTOR(Echo, &Echo::echo);

using lumen::bench::figure;
using lumen::bench::rate;
using lumen::bench::verify;

long sum_of(const std::vector<int>& xs) {
  return std::accumulate(xs.begin(), xs.end(), 0L);
}

// n calls whose arguments are 0..n-1 return that sum.
long expected_sum(long n) {
  return n * (n - 1) / 2;
}

figure tasks_sync(int reps, long n) {
  return {"single_client_tasks_sync", "ops/s",
          rate(reps, n,
               [n] {
                 long sum = 0;
                 for (int i = 0; i < n; ++i)
                   sum += lumen::get(lumen::task(echo_task).remote(i));
                 verify(sum == expected_sum(n), "tasks_sync sum");
               }),
          n};
}

figure tasks_async(int reps, long n) {
  return {"single_client_tasks_async", "ops/s",
          rate(reps, n,
               [n] {
                 std::vector<lumen::ObjectRef<int>> refs;
                 refs.reserve(n);
                 for (int i = 0; i < n; ++i)
                   refs.push_back(lumen::task(echo_task).remote(i));
                 verify(sum_of(lumen::get(refs)) == expected_sum(n),
                        "tasks_async sum");
               }),
          n};
}

figure actor_calls_sync(int reps, long n) {
  auto a = lumen::actor<Echo>().remote();
  return {"1_1_actor_calls_sync", "ops/s",
          rate(reps, n,
               [&a, n] {
                 long sum = 0;
                 for (int i = 0; i < n; ++i)
                   sum += lumen::get(a.call(&Echo::echo, i));
                 verify(sum == expected_sum(n), "actor_calls_sync sum");
               }),
          n};
}

void async_batch(const lumen::ActorHandle<Echo>& a, long n) {
  std::vector<lumen::ObjectRef<int>> refs;
  refs.reserve(n);
  for (int i = 0; i < n; ++i)
    refs.push_back(a.call(&Echo::echo, i));
  verify(sum_of(lumen::get(refs)) == expected_sum(n), "actor_calls_async sum");
}

figure actor_calls_async(int reps, long n) {
  auto a = lumen::actor<Echo>().remote();
  return {"1_1_actor_calls_async", "ops/s",
          rate(reps, n, [&a, n] { async_batch(a, n); }), n};
}

// n callers, each with an actor of its own, all calling at once.
figure n_n_actor_calls_async(int reps, long n) {
  auto callers = std::max(2u, std::thread::hardware_concurrency());
  std::vector<lumen::ActorHandle<Echo>> actors;
  for (unsigned i = 0; i < callers; ++i)
    actors.push_back(lumen::actor<Echo>().remote());
  return {"n_n_actor_calls_async", "ops/s",
          rate(reps, n * callers,
               [&] {
                 std::vector<std::thread> threads;
                 for (auto& a : actors)
                   threads.emplace_back([&a, n] { async_batch(a, n); });
                 for (auto& t : threads)
                   t.join();
               }),
          n * callers};
}

figure put_calls(int reps, long n) {
  return {"single_client_put_calls", "ops/s",
          rate(reps, n,
               [n] {
                 lumen::ObjectRef<int> last;
                 for (int i = 0; i < n; ++i)
                   last = lumen::put(i);
                 verify(lumen::get(last) == n - 1, "put value");
               }),
          n};
}

figure get_calls(int reps, long n) {
  auto ref = lumen::put(1);
  return {"single_client_get_calls", "ops/s",
          rate(reps, n,
               [&ref, n] {
                 long sum = 0;
                 for (int i = 0; i < n; ++i)
                   sum += lumen::get(ref);
                 verify(sum == n, "get sum");
               }),
          n};
}

caf::behavior caf_echo() {
  return {[](int x) { return x; }};
}

// Each response triggers the next request: a strictly sequential chain.
void chain(caf::event_based_actor* self, caf::actor target, long left,
           std::shared_ptr<std::promise<void>> done) {
  self->request(target, caf::infinite, 1).then([=](int) {
    if (left == 1)
      done->set_value();
    else
      chain(self, target, left - 1, done);
  });
}

figure caf_request_chain(int reps, long n) {
  auto& sys = lumen::system();
  auto echo = sys.spawn(caf_echo);
  figure f{"caf_request_chain", "ops/s",
           rate(reps, n,
                [&] {
                  auto done = std::make_shared<std::promise<void>>();
                  auto finished = done->get_future();
                  sys.spawn([=](caf::event_based_actor* self) {
                    chain(self, echo, n, done);
                  });
                  finished.wait();
                }),
           n};
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  return f;
}

figure caf_scoped_roundtrip(int reps, long n) {
  auto& sys = lumen::system();
  auto echo = sys.spawn(caf_echo);
  figure f{"caf_scoped_actor_roundtrip", "ops/s",
           rate(reps, n,
                [&] {
                  caf::scoped_actor self{sys};
                  long sum = 0;
                  for (int i = 0; i < n; ++i)
                    self->request(echo, caf::infinite, i)
                      .receive(
                        [&](int x) { sum += x; },
                        [](caf::error&) { verify(false, "scoped error"); });
                  verify(sum == expected_sum(n), "scoped sum");
                }),
           n};
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  return f;
}

/// What recording a trace costs: `measure` in a runtime of its own, then
/// in one recording a trace (its file removed after), side by side.
template <class Measure>
std::vector<figure> with_and_without_trace(Measure measure) {
  lumen::init();
  auto plain = measure();
  lumen::shutdown();
  char tmpl[] = "/tmp/lumen-bench-trace-XXXXXX";
  std::filesystem::path dir = ::mkdtemp(tmpl);
  lumen::init_options opts;
  opts.trace_file = (dir / "bench.json").string();
  lumen::init(opts);
  auto traced = measure();
  lumen::shutdown(); // writes the trace: proof it recorded
  std::filesystem::remove_all(dir);
  plain.name = "untraced_" + plain.name;
  traced.name = "traced_" + traced.name;
  lumen::bench::compare(traced, plain);
  return {plain, traced};
}

} // namespace

int main(int argc, char** argv) {
  lumen::util::use_huge_pages();
  auto opts = lumen::bench::options_or_exit(
    argc, argv, "runtime_bench",
    "tasks, actor calls, put and get per second, next to "
    "raw CAF");
  // Sizes: a few hundred milliseconds per repetition on a 2-core machine.
  long scale = opts.smoke ? 1 : 100;
  lumen::init();
  std::vector<figure> figs;
  figs.push_back(tasks_sync(opts.reps, 200 * scale));
  figs.push_back(tasks_async(opts.reps, 2000 * scale));
  figs.push_back(actor_calls_sync(opts.reps, 500 * scale));
  figs.push_back(actor_calls_async(opts.reps, 2000 * scale));
  figs.push_back(n_n_actor_calls_async(opts.reps, 1000 * scale));
  figs.push_back(put_calls(opts.reps, 5000 * scale));
  figs.push_back(get_calls(opts.reps, 5000 * scale));
  auto chain_fig = caf_request_chain(opts.reps, 1000 * scale);
  auto scoped_fig = caf_scoped_roundtrip(opts.reps, 100 * scale);
  lumen::bench::compare(figs[3], chain_fig);  // async calls vs CAF chain
  lumen::bench::compare(figs[2], scoped_fig); // sync calls vs scoped_actor
  figs.push_back(chain_fig);
  figs.push_back(scoped_fig);
  lumen::shutdown();
  // A tenth of the calls: a trace's spans stay within its bound.
  for (auto& f : with_and_without_trace(
         [&] { return tasks_async(opts.reps, 200 * scale); }))
    figs.push_back(f);
  for (auto& f : with_and_without_trace(
         [&] { return actor_calls_sync(opts.reps, 50 * scale); }))
    figs.push_back(f);
  for (auto& f : with_and_without_trace(
         [&] { return actor_calls_async(opts.reps, 200 * scale); }))
    figs.push_back(f);
  lumen::bench::print("runtime_bench", figs, opts.json);
}
