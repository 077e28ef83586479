// What the playground's pages call: the simulations of lumen/ml/sim.hpp,
// compiled to WebAssembly. Each function takes its parameters as a JSON
// object and answers with JSON (a string valid until the next call); a
// parameter the simulation refuses comes back as {"error": "..."} with
// the simulation's own message. The pages only draw what comes back.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include <emscripten/emscripten.h>
#include <nlohmann/json.hpp>

#include <lumen/errors.hpp>
#include <lumen/ml/sim.hpp>
#include <lumen/trace.hpp>

// The browser has no trace recorder (the runtime's is not built here): the
// spans the cores open see `recording` off and record nothing.
namespace lumen::trace::detail {
std::atomic<bool> recording{false};
uint64_t now_us() noexcept {
  return 0;
}
void record_span(const char*, const char*, uint64_t, const span_arg*,
                 int) noexcept {}
} // namespace lumen::trace::detail

namespace {

using nlohmann::json;
using namespace lumen::ml;

std::string answer;

const char* reply(const json& j) {
  answer = j.dump();
  return answer.c_str();
}

template <class F>
const char* guarded(F&& f) {
  try {
    return reply(f());
  } catch (const std::exception& e) {
    return reply(json{{"error", e.what()}});
  }
}

json parse(const char* text) {
  auto j = json::parse(text ? text : "{}", nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw lumen::usage_error("the parameters are not a JSON object");
  return j;
}

json frame_json(const sim::ring_frame& f) {
  json ranks = json::array();
  for (size_t r = 0; r < f.ranks.size(); ++r) {
    json x{{"rank", r},
           {"sent_chunk", f.ranks[r].send_chunk},
           {"received_chunk", f.ranks[r].recv_chunk}};
    if (r < f.buffers.size())
      x["buffer"] = f.buffers[r];
    if (r < f.holders.size())
      x["holders"] = f.holders[r];
    if (r < f.bytes_sent.size())
      x["bytes_sent"] = f.bytes_sent[r];
    ranks.push_back(std::move(x));
  }
  return {{"phase", lumen::collective::to_string(f.phase)},
          {"step", f.step},
          {"time_ms", f.time_ms},
          {"ranks", std::move(ranks)}};
}

json ring_json(const sim::ring_run& run) {
  json frames = json::array();
  for (auto& f : run.frames)
    frames.push_back(frame_json(f));
  json chunks = json::array();
  for (size_t c = 0; c < run.config.ranks; ++c) {
    auto ch =
      lumen::collective::chunk_of(run.config.length, run.config.ranks, c);
    chunks.push_back({ch.begin, ch.end});
  }
  return {{"ranks", run.config.ranks},
          {"chunks", std::move(chunks)},
          {"length", run.config.length},
          {"seed", run.config.seed},
          {"op", lumen::collective::to_string(run.config.op)},
          {"inputs", run.inputs},
          {"expected", run.expected},
          {"frames", std::move(frames)},
          {"bytes", run.config.length * sizeof(float)},
          {"bound_bytes", run.bound_bytes},
          {"naive",
           {{"root_bytes", run.naive.root_bytes},
            {"other_bytes", run.naive.other_bytes},
            {"time_ms", run.naive.time_ms}}}};
}

lumen::collective::reduce_op op_named(const std::string& name) {
  using lumen::collective::reduce_op;
  for (auto op : {reduce_op::sum, reduce_op::product, reduce_op::min,
                  reduce_op::max, reduce_op::average})
    if (name == lumen::collective::to_string(op))
      return op;
  throw lumen::usage_error("no reduction named '" + name +
                           "'; use sum, product, min, max or average");
}

std::unique_ptr<sim::ps_sim> server;

/// The simulation's state, with the workers' timeline of the last
/// `window_ms` of virtual time.
json ps_json(const sim::ps_sim& s, double window_ms) {
  auto& core = s.server();
  auto& stats = core.stats();
  json workers = json::array();
  for (auto& w : s.workers())
    workers.push_back({{"state", sim::to_string(w.state)},
                       {"version", w.version},
                       {"pushes", w.pushes},
                       {"dropped", w.dropped},
                       {"last_staleness", w.last_staleness},
                       {"grad_norm", w.grad_norm},
                       {"busy_until_ms", w.busy_until_ms}});
  json losses = json::array();
  for (auto& p : s.losses())
    losses.push_back({p.time_ms, p.version, p.loss});
  json staleness = json::array();
  for (auto& [k, n] : stats.staleness)
    staleness.push_back({k, n});
  json refused = json::object();
  for (auto& [why, n] : stats.refused)
    refused[to_string(why)] = n;
  json segments = json::array();
  for (auto& g : s.segments())
    if (g.end_ms >= s.now_ms() - window_ms)
      segments.push_back(
        {g.worker, sim::to_string(g.state), g.start_ms, g.end_ms, g.version});
  return {{"time_ms", s.now_ms()},
          {"mode", to_string(s.config().mode)},
          {"diverged", s.diverged()},
          {"segments", std::move(segments)},
          {"version", core.version()},
          {"applied", stats.applied},
          {"refused", std::move(refused)},
          {"workers", std::move(workers)},
          {"losses", std::move(losses)},
          {"initial_loss", s.initial_loss()},
          {"staleness", std::move(staleness)},
          {"weight_error", s.weight_error()},
          {"weights", core.weights()},
          {"event", s.last_event()}};
}

std::unique_ptr<sim::ddp_sim> trainer;

json ddp_json(const sim::ddp_sim& s) {
  json layers = json::array();
  for (auto& l : s.layers())
    layers.push_back({l.begin, l.end});
  json buckets = json::array();
  for (auto& b : s.buckets())
    buckets.push_back({{"first_layer", b.first_layer},
                       {"last_layer", b.last_layer},
                       {"params", {b.params.begin, b.params.end}}});
  json history = json::array();
  for (auto& r : s.history())
    history.push_back({{"step", r.step},
                       {"start_ms", r.start_ms},
                       {"end_ms", r.end_ms},
                       {"backward_end_ms", r.backward_end_ms},
                       {"serial_ms", r.serial_ms},
                       {"loss", r.loss},
                       {"drift", r.drift},
                       {"rebroadcast", r.rebroadcast}});
  json spans = json::array();
  if (!s.history().empty())
    for (auto& g : s.history().back().spans)
      spans.push_back(
        {g.worker, g.lane, g.what, g.bucket, g.start_ms, g.end_ms});
  json replicas = json::array();
  auto& first = s.replicas()[0];
  for (auto& p : s.replicas()) {
    float apart = 0;
    for (size_t k = 0; k < p.size(); ++k)
      apart = std::max(apart, std::fabs(p[k] - first[k]));
    replicas.push_back({{"head", std::vector<float>(p.begin(), p.begin() + 4)},
                        {"from_rank0", apart}});
  }
  return {{"layers", std::move(layers)},     {"buckets", std::move(buckets)},
          {"history", std::move(history)},   {"spans", std::move(spans)},
          {"replicas", std::move(replicas)}, {"drift", s.drift()}};
}

sim::ps_sim& running() {
  if (!server)
    throw lumen::usage_error("no simulation yet; call lp_ps_reset first");
  return *server;
}

} // namespace

extern "C" {

/// A whole ring all-reduce: {"ranks", "length", "seed", "op",
/// "latency_ms", "mbytes_per_ms"}, each optional.
EMSCRIPTEN_KEEPALIVE const char* lp_ring(const char* params) {
  return guarded([&] {
    auto p = parse(params);
    sim::ring_config cfg;
    cfg.ranks = p.value("ranks", cfg.ranks);
    cfg.length = p.value("length", cfg.length);
    cfg.seed = p.value("seed", cfg.seed);
    cfg.op = op_named(p.value("op", std::string{"sum"}));
    cfg.latency_ms = p.value("latency_ms", cfg.latency_ms);
    cfg.mbytes_per_ms = p.value("mbytes_per_ms", cfg.mbytes_per_ms);
    return ring_json(sim::run_ring(cfg));
  });
}

/// A recorded run (ml_scratch03's --step=json) against the reference.
EMSCRIPTEN_KEEPALIVE const char* lp_ring_replay(const char* jsonl) {
  return guarded([&] {
    auto v = sim::replay_ring(jsonl ? jsonl : "");
    json recorded = json::array();
    for (auto& f : v.recorded)
      recorded.push_back(frame_json(f));
    json out{{"matches", v.matches},
             {"steps", v.steps},
             {"first_bad", v.first_bad},
             {"what", v.what},
             {"recorded", std::move(recorded)}};
    if (!v.reference.frames.empty())
      out["reference"] = ring_json(v.reference);
    return out;
  });
}

/// A recorded run of this page's exercise (its --step=json output)
/// against the reference solution's, which the build embedded.
EMSCRIPTEN_KEEPALIVE const char* lp_compare_run(const char* recorded) {
  return guarded([&] {
    // C stdio, not iostreams: those would double the page's size.
    std::unique_ptr<FILE, int (*)(FILE*)> in{
      std::fopen("/reference.jsonl", "rb"), &std::fclose};
    if (!in)
      throw lumen::usage_error("this page was built without the reference "
                               "run (the examples were off); build with "
                               "LUMEN_BUILD_EXAMPLES=ON");
    std::string reference;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), in.get())) > 0;)
      reference.append(buf, n);
    std::string mine = recorded ? recorded : "";
    auto v = sim::compare_runs(reference, mine);
    auto line = [](const std::string& text, size_t n) {
      // The n-th line (from 1), or "" for 0 or past the end.
      size_t at = 0;
      for (size_t i = 1; i < n && at != std::string::npos; ++i)
        if ((at = text.find('\n', at)) != std::string::npos)
          ++at;
      if (n == 0 || at == std::string::npos)
        return std::string{};
      return text.substr(at, text.find('\n', at) - at);
    };
    return json{{"matches", v.matches},
                {"steps", v.steps},
                {"first_bad", v.first_bad},
                {"what", v.what},
                {"reference_line", line(reference, v.first_bad)},
                {"recorded_line", line(mine, v.first_bad)}};
  });
}

/// A new parameter-server simulation: {"mode": "sync"|"async", "workers",
/// "backup", "lr", "staleness_fix", "clip_norm", "compression",
/// "straggler", "compute_ms", "jitter", "network_ms", "seed"}.
EMSCRIPTEN_KEEPALIVE const char* lp_ps_reset(const char* params) {
  return guarded([&] {
    auto p = parse(params);
    sim::ps_sim_config cfg;
    auto mode = p.value("mode", std::string{"async"});
    if (mode != "sync" && mode != "async")
      throw lumen::usage_error("no mode '" + mode + "'; use sync or async");
    cfg.mode = mode == "sync" ? ps_mode::sync : ps_mode::async;
    cfg.workers = p.value("workers", cfg.workers);
    cfg.backup = p.value("backup", cfg.backup);
    cfg.lr = p.value("lr", cfg.lr);
    cfg.staleness_lr = p.value("staleness_fix", cfg.staleness_lr);
    cfg.clip_norm = p.value("clip_norm", cfg.clip_norm);
    auto c = p.value("compression", std::string{"none"});
    cfg.compression = c == "fp16"   ? codec::fp16
                      : c == "int8" ? codec::int8
                                    : codec::none;
    if (c != to_string(cfg.compression))
      throw lumen::usage_error("no compression '" + c +
                               "'; use none, fp16 or int8");
    cfg.straggler = p.value("straggler", cfg.straggler);
    cfg.compute_ms = p.value("compute_ms", cfg.compute_ms);
    cfg.jitter = p.value("jitter", cfg.jitter);
    cfg.network_ms = p.value("network_ms", cfg.network_ms);
    cfg.seed = p.value("seed", cfg.seed);
    auto next = std::make_unique<sim::ps_sim>(cfg);
    server = std::move(next);
    return ps_json(*server, 0);
  });
}

/// Runs `events` more events of the simulation; the timeline covers the
/// last `window_ms`.
EMSCRIPTEN_KEEPALIVE const char* lp_ps_step(int events, double window_ms) {
  return guarded([&] {
    auto& s = running();
    for (int i = 0; i < events; ++i)
      s.step();
    return ps_json(s, window_ms);
  });
}

/// Runs until the server's version reaches `version`.
EMSCRIPTEN_KEEPALIVE const char* lp_ps_run_to(int version, double window_ms) {
  return guarded([&] {
    auto& s = running();
    s.run_to(static_cast<uint64_t>(version < 0 ? 0 : version));
    return ps_json(s, window_ms);
  });
}

/// A new data-parallel simulation: {"workers", "lr", "overlap",
/// "same_init", "skip_a_bucket", "rebroadcast_every", "straggler",
/// "first_bucket_floats", "bucket_cap_floats", "mbytes_per_ms", "seed"}.
EMSCRIPTEN_KEEPALIVE const char* lp_ddp_reset(const char* params) {
  return guarded([&] {
    auto p = parse(params);
    sim::ddp_sim_config cfg;
    cfg.workers = p.value("workers", cfg.workers);
    cfg.lr = p.value("lr", cfg.lr);
    cfg.overlap = p.value("overlap", cfg.overlap);
    cfg.same_init = p.value("same_init", cfg.same_init);
    cfg.skip_a_bucket = p.value("skip_a_bucket", cfg.skip_a_bucket);
    cfg.rebroadcast_every = p.value("rebroadcast_every", cfg.rebroadcast_every);
    cfg.straggler = p.value("straggler", cfg.straggler);
    cfg.first_bucket_floats =
      p.value("first_bucket_floats", cfg.first_bucket_floats);
    cfg.bucket_cap_floats = p.value("bucket_cap_floats", cfg.bucket_cap_floats);
    cfg.mbytes_per_ms = p.value("mbytes_per_ms", cfg.mbytes_per_ms);
    cfg.seed = p.value("seed", cfg.seed);
    trainer = std::make_unique<sim::ddp_sim>(cfg);
    return ddp_json(*trainer);
  });
}

/// Runs `steps` more steps of every replica.
EMSCRIPTEN_KEEPALIVE const char* lp_ddp_step(int steps) {
  return guarded([&] {
    if (!trainer)
      throw lumen::usage_error("no simulation yet; call lp_ddp_reset first");
    for (int i = 0; i < steps; ++i)
      trainer->step();
    return ddp_json(*trainer);
  });
}

} // extern "C"
