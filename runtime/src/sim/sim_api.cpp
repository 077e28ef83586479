#include "lumen/sim.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "lumen/errors.hpp"
#include "lumen/init.hpp"

#include "sim/sim_runtime.hpp"
#include "sim/sim_world.hpp"

namespace lumen {

namespace {

detail::sim::world& running(const char* api) {
  auto* w = detail::sim::live();
  if (w == nullptr)
    throw usage_error(std::string{api} +
                      ": no simulated run is in progress; start the script "
                      "with --simulate[=SEED] (or LUMEN_SIMULATE=SEED)");
  return *w;
}

/// A number with a unit suffix: `text` = 1.5ms -> {1.5, "ms"}.
std::pair<double, std::string> number_and_unit(const std::string& text) {
  size_t used = 0;
  double v = std::stod(text, &used);
  if (!std::isfinite(v) || v < 0)
    throw std::invalid_argument("");
  return {v, text.substr(used)};
}

} // namespace

std::chrono::steady_clock::time_point now() {
  if (auto* w = detail::sim::live())
    return std::chrono::steady_clock::time_point{
      std::chrono::nanoseconds{w->time()}};
  return std::chrono::steady_clock::now();
}

namespace detail {

void sleep_ns(std::chrono::nanoseconds d) {
  if (auto* w = sim::live()) {
    w->sleep(d.count());
    return;
  }
  std::this_thread::sleep_for(d);
}

namespace sim {

void quote_json(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

std::chrono::nanoseconds parse_duration(const std::string& text) {
  try {
    auto [v, unit] = number_and_unit(text);
    double ns_per = unit == "ns"   ? 1
                    : unit == "us" ? 1e3
                    : unit == "ms" ? 1e6
                    : unit == "s"  ? 1e9
                                   : -1;
    if (ns_per >= 0)
      return std::chrono::nanoseconds{std::llround(v * ns_per)};
  } catch (const std::exception&) {
  }
  throw usage_error("'" + text +
                    "' is not a time: give a number and one of ns, us, ms, "
                    "s, e.g. 50us");
}

void parse_link(const std::string& text, sim_options& opts) {
  auto comma = text.find(',');
  auto bad = [&](const std::string& why) {
    return usage_error("'" + text + "': " + why +
                       "; give LATENCY,BANDWIDTH, e.g. 50us,10Gbit or "
                       "1ms,125MB (bytes per second)");
  };
  if (comma == std::string::npos)
    throw bad("no comma");
  opts.latency = parse_duration(text.substr(0, comma));
  try {
    auto [bw, bu] = number_and_unit(text.substr(comma + 1));
    double per = bu == "bit"    ? 1.0 / 8
                 : bu == "Kbit" ? 1e3 / 8
                 : bu == "Mbit" ? 1e6 / 8
                 : bu == "Gbit" ? 1e9 / 8
                 : bu == "B"    ? 1
                 : bu == "KB"   ? 1e3
                 : bu == "MB"   ? 1e6
                 : bu == "GB"   ? 1e9
                                : -1;
    if (per < 0)
      throw bad("the bandwidth's unit is one of bit, Kbit, Mbit, Gbit, B, KB, "
                "MB, GB");
    opts.bandwidth = bw * per;
  } catch (const usage_error&) {
    throw;
  } catch (const std::exception&) {
    throw bad("the bandwidth is not a number with a unit");
  }
}

} // namespace sim

} // namespace detail

namespace sim {

std::string to_json(const event& e) {
  std::string out = "{\"seq\":" + std::to_string(e.seq) +
                    ",\"t\":" + std::to_string(e.time.count()) + ",\"kind\":";
  detail::sim::quote_json(out, e.kind);
  out += ",\"node\":";
  detail::sim::quote_json(out, e.node);
  if (!e.peer.empty()) {
    out += ",\"peer\":";
    detail::sim::quote_json(out, e.peer);
  }
  out += ",\"what\":";
  detail::sim::quote_json(out, e.what);
  if (e.kind == "send" || e.kind == "deliver")
    out += ",\"bytes\":" + std::to_string(e.bytes);
  out += ",\"work\":" + std::to_string(e.work) + "}";
  return out;
}

bool active() noexcept {
  return detail::sim::live() != nullptr;
}

uint64_t seed() {
  return running("lumen::sim::seed").options().seed;
}

std::chrono::nanoseconds now() {
  return std::chrono::nanoseconds{running("lumen::sim::now").time()};
}

void charge(std::chrono::duration<double> d) {
  auto& w = running("lumen::sim::charge");
  w.sleep(w.compute_time(d.count()));
}

bool step() {
  auto& w = running("lumen::sim::step");
  if (w.in_work())
    throw usage_error("lumen::sim::step: called from inside a task or "
                      "method; step the run from the script itself");
  return w.step();
}

void run_until(const std::function<bool()>& done) {
  auto& w = running("lumen::sim::run_until");
  if (w.in_work())
    throw usage_error("lumen::sim::run_until: called from inside a task or "
                      "method; step the run from the script itself");
  w.wait_until(done, detail::sim::no_deadline,
               [](const std::function<void()>&) {});
}

void on_event(std::function<void(const event&)> observer) {
  running("lumen::sim::on_event").observe(std::move(observer));
}

namespace {

/// The simulated runtime and the index of node `id` in it, for `api`.
detail::sim_runtime& sim_runtime(const char* api) {
  running(api);
  auto* rt = dynamic_cast<detail::sim_runtime*>(&detail::current_runtime());
  if (rt == nullptr)
    throw usage_error(std::string{api} +
                      ": no simulated run is in progress; start the script "
                      "with --simulate[=SEED] (or LUMEN_SIMULATE=SEED)");
  return *rt;
}

} // namespace

void kill_node(const std::string& id, std::chrono::nanoseconds at) {
  auto& rt = sim_runtime("lumen::sim::kill_node");
  rt.kill_node(rt.node_named(id, "lumen::sim::kill_node", false), at.count());
}

void restart_node(const std::string& id, std::chrono::nanoseconds at) {
  auto& rt = sim_runtime("lumen::sim::restart_node");
  rt.restart_node(rt.node_named(id, "lumen::sim::restart_node", false),
                  at.count());
}

void partition(const std::vector<std::string>& side,
               std::chrono::nanoseconds at, std::chrono::nanoseconds lasting) {
  const char* api = "lumen::sim::partition";
  auto& rt = sim_runtime(api);
  std::vector<bool> marked(static_cast<size_t>(rt.world().nodes()), false);
  for (auto& id : side)
    marked[static_cast<size_t>(rt.node_named(id, api, true))] = true;
  rt.partition(std::move(marked), at.count(), lasting.count(), api);
}

void slow_node(const std::string& id, double factor,
               std::chrono::nanoseconds at, std::chrono::nanoseconds lasting) {
  const char* api = "lumen::sim::slow_node";
  auto& rt = sim_runtime(api);
  auto n = rt.node_named(id, api, true);
  if (!std::isfinite(factor) || factor <= 0)
    throw usage_error(std::string{api} +
                      ": the factor must be a positive number");
  rt.slow_node(n, factor, at.count(), std::max<int64_t>(lasting.count(), 0));
}

void send_to(const std::string& to, uint64_t bytes, const std::string& label,
             std::function<void()> arrived) {
  const char* api = "lumen::sim::send_to";
  auto& rt = sim_runtime(api);
  auto& w = rt.world();
  auto n = rt.node_named(to, api, true);
  w.send(w.here(), n, bytes, w.label(label), 0, std::move(arrived));
}

bool wait_for(const std::function<bool()>& ready,
              std::chrono::nanoseconds timeout) {
  auto& w = running("lumen::sim::wait_for");
  auto deadline = timeout.count() >= detail::sim::no_deadline - w.time()
                    ? detail::sim::no_deadline
                    : w.time() + std::max<int64_t>(timeout.count(), 0);
  return w.watch(ready, deadline);
}

bool known_down(const std::string& id) {
  const char* api = "lumen::sim::known_down";
  auto& rt = sim_runtime(api);
  return rt.world().known_down(rt.node_named(id, api, true));
}

void run_beside(std::function<void()> body) {
  running("lumen::sim::run_beside").run_beside(std::move(body));
}

uint64_t run_number() {
  return running("lumen::sim::run_number").number();
}

std::string running_actor() {
  auto& w = running("lumen::sim::running_actor");
  if (auto typed = w.typed_actor(); typed != 0)
    return "typed-" + std::to_string(typed);
  return lumen::current_actor_id();
}

sweep_result sweep(uint64_t first, uint64_t last,
                   const std::function<void()>& script, init_options opts) {
  if (is_initialized())
    throw usage_error("lumen::sim::sweep starts a simulated cluster for each "
                      "seed; call it before lumen::init or after "
                      "lumen::shutdown");
  if (last < first)
    throw usage_error("lumen::sim::sweep: the last seed is below the first");
  sweep_result out;
  opts.sim.enabled = true;
  // A line a run would bury what failed.
  struct quiet_runs {
    quiet_runs() {
      detail::sim::quiet_summaries(true);
    }
    ~quiet_runs() {
      detail::sim::quiet_summaries(false);
    }
  } quiet;
  for (auto seed = first;; ++seed) {
    opts.sim.seed = seed;
    init(opts); // bad options fail the sweep, not each seed
    try {
      script();
    } catch (const std::exception& e) {
      out.failed.emplace_back(seed, e.what());
    } catch (...) {
      out.failed.emplace_back(seed, "an exception of a type not derived "
                                    "from std::exception");
    }
    shutdown();
    ++out.runs;
    if (seed == last)
      break;
  }
  return out;
}

} // namespace sim

} // namespace lumen
