#include "lumen/ml/sim.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include <lumen/errors.hpp>

namespace lumen::ml::sim {

void scheduler::after(double delay_ms, std::function<void()> f) {
  queue_.push({now_ + std::max(0.0, delay_ms), scheduled_++, std::move(f)});
}

bool scheduler::run_next() {
  if (queue_.empty())
    return false;
  auto e = queue_.top();
  queue_.pop();
  now_ = e.at;
  e.run();
  return true;
}

double scheduler::uniform() noexcept {
  return static_cast<double>(rng_() >> 11) / 9007199254740992.0;
}

// ---- the ring ----------------------------------------------------------

namespace {

using collective::reduce_op;
using collective::ring_phase;

/// The ranks whose input a value holds: the ring's own reductions run on
/// it (`+=` is the union), so the colours come from the schedule itself.
struct holder_set {
  uint64_t ranks = 0;

  holder_set() = default;
  explicit holder_set(size_t) {} // what `finish` divides by; never used
  holder_set& operator+=(const holder_set& other) {
    ranks |= other.ranks;
    return *this;
  }
  holder_set& operator*=(const holder_set& other) {
    return *this += other;
  }
  friend holder_set operator/(holder_set a, holder_set) {
    return a;
  }
  friend bool operator<(const holder_set& a, const holder_set& b) {
    return a.ranks < b.ranks;
  }
};

} // namespace

float ring_input(uint64_t seed, size_t rank, size_t i) {
  if (seed == 0)
    return static_cast<float>((rank + 1) * 10 + i % 7);
  auto z = derive_seed(seed, rank * 1000003 + i);
  return static_cast<float>(z % 100);
}

ring_run run_ring(const ring_config& cfg) {
  if (cfg.ranks < 2 || cfg.ranks > 64)
    throw usage_error("a ring of " + std::to_string(cfg.ranks) +
                      " ranks; give 2 to 64");
  if (cfg.length == 0)
    throw usage_error("a buffer of 0 elements; give 1 or more");
  if (!(cfg.mbytes_per_ms > 0) || !(cfg.latency_ms >= 0))
    throw usage_error("a link needs a positive bandwidth and a latency of 0 "
                      "or more");
  ring_run run;
  run.config = cfg;
  size_t n = cfg.ranks;
  run.inputs.assign(n, std::vector<float>(cfg.length));
  std::vector<std::vector<holder_set>> who(n,
                                           std::vector<holder_set>(cfg.length));
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < cfg.length; ++i) {
      run.inputs[r][i] = ring_input(cfg.seed, r, i);
      who[r][i].ranks = uint64_t{1} << r;
    }
  run.expected = run.inputs[0];
  for (size_t r = 1; r < n; ++r)
    collective::reduce_into(run.expected.data(), run.inputs[r].data(),
                            cfg.length, cfg.op);
  collective::finish(run.expected.data(), cfg.length, cfg.op, n);

  auto bufs = run.inputs;
  std::vector<size_t> sent(n, 0);
  double time = 0;
  collective::simulate_allreduce(
    bufs, cfg.op, [&](const collective::ring_snapshot& snap, const auto& now) {
      ring_frame f;
      f.phase = snap.phase;
      f.step = snap.step;
      f.ranks = snap.ranks;
      f.buffers = now;
      size_t widest = 0;
      for (size_t r = 0; r < n; ++r) {
        auto c = collective::chunk_of(cfg.length, n, snap.ranks[r].send_chunk);
        sent[r] += c.size() * sizeof(float);
        widest = std::max(widest, c.size() * sizeof(float));
      }
      time +=
        cfg.latency_ms + static_cast<double>(widest) / 1e6 / cfg.mbytes_per_ms;
      f.bytes_sent = sent;
      f.time_ms = time;
      run.frames.push_back(std::move(f));
    });
  // The same schedule over who holds what.
  size_t frame = 0;
  collective::simulate_allreduce(
    who, reduce_op::sum,
    [&](const collective::ring_snapshot&, const auto& now) {
      auto& f = run.frames[frame++];
      f.holders.assign(n, std::vector<uint64_t>(n, 0));
      for (size_t r = 0; r < n; ++r)
        for (size_t c = 0; c < n; ++c) {
          auto ch = collective::chunk_of(cfg.length, n, c);
          if (ch.size() > 0)
            f.holders[r][c] = now[r][ch.begin].ranks;
        }
    });
  // The averaging of `finish` happens after the last step.
  if (!run.frames.empty())
    run.frames.back().buffers = bufs;

  size_t bytes = cfg.length * sizeof(float);
  run.bound_bytes = 2 * bytes * (n - 1) / n;
  run.naive.root_bytes = (n - 1) * bytes;
  run.naive.other_bytes = bytes;
  run.naive.time_ms =
    2.0 * static_cast<double>(n - 1) *
    (cfg.latency_ms + static_cast<double>(bytes) / 1e6 / cfg.mbytes_per_ms);
  return run;
}

namespace {

std::string join(const std::vector<float>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0)
      out += ", ";
    auto x = v[i];
    out += x == std::floor(x) && std::fabs(x) < 1e9
             ? std::to_string(static_cast<long long>(x))
             : std::to_string(x);
  }
  return out + "]";
}

/// One JSON object a line into `out`; the 1-based number of the first
/// line that is not one, or 0.
size_t parse_lines(const std::string& text,
                   std::vector<nlohmann::ordered_json>& out) {
  size_t at = 0;
  while (at < text.size()) {
    auto end = text.find('\n', at);
    if (end == std::string::npos)
      end = text.size();
    auto line = text.substr(at, end - at);
    at = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    auto j = nlohmann::ordered_json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return out.size() + 1;
    out.push_back(std::move(j));
  }
  return 0;
}

/// How `got` differs from `want` at `path`, or "" if it does not.
std::string difference(const nlohmann::ordered_json& want,
                       const nlohmann::ordered_json& got,
                       const std::string& path, double tolerance) {
  auto says = [&](const nlohmann::ordered_json& j) { return j.dump(); };
  if (want.is_number()) {
    if (!got.is_number())
      return path + " is " + says(got) + ", the reference has " + says(want);
    double a = want.get<double>(), b = got.get<double>();
    if (std::fabs(a - b) > tolerance * std::max({1.0, std::fabs(a)}))
      return path + " is " + says(got) + ", the reference has " + says(want);
    return {};
  }
  if (want.is_object()) {
    if (!got.is_object())
      return path + " is " + says(got) + ", the reference has an object";
    for (auto& [key, value] : want.items()) {
      auto at = path.empty() ? key : path + "." + key;
      if (!got.contains(key))
        return "there is no " + at + "; the reference has " + says(value);
      if (auto d = difference(value, got[key], at, tolerance); !d.empty())
        return d;
    }
    return {};
  }
  if (want.is_array()) {
    if (!got.is_array() || got.size() != want.size())
      return path + " has " +
             (got.is_array() ? std::to_string(got.size()) + " elements"
                             : says(got)) +
             ", the reference " + std::to_string(want.size());
    for (size_t i = 0; i < want.size(); ++i)
      if (auto d = difference(want[i], got[i],
                              path + "[" + std::to_string(i) + "]", tolerance);
          !d.empty())
        return d;
    return {};
  }
  if (want != got)
    return path + " is " + says(got) + ", the reference has " + says(want);
  return {};
}

} // namespace

replay_verdict replay_ring(const std::string& jsonl) {
  replay_verdict v;
  auto fail = [&](size_t step, std::string what) {
    v.matches = false;
    v.first_bad = step;
    v.what = std::move(what);
    return v;
  };
  std::vector<nlohmann::ordered_json> lines;
  if (auto bad = parse_lines(jsonl, lines); bad > 0)
    return fail(bad, "line " + std::to_string(bad) +
                       " is not a JSON object; load the output of `lumen "
                       "exercises run ml_scratch03 --step=json`");
  v.steps = lines.size();
  if (lines.empty())
    return fail(0, "the file holds no steps; load the output of `lumen "
                   "exercises run ml_scratch03 --step=json`");
  auto& first = lines[0];
  if (!first.contains("ranks") || !first["ranks"].is_array() ||
      first["ranks"].empty() || !first["ranks"][0].contains("buffer"))
    return fail(1, "step 1 has no ranks with buffers; is this ml_scratch03's "
                   "--step=json output?");
  ring_config cfg;
  cfg.ranks = first["ranks"].size();
  cfg.length = first["ranks"][0]["buffer"].size();
  try {
    v.reference = run_ring(cfg);
  } catch (const usage_error& e) {
    return fail(1, e.what());
  }
  auto& ref = v.reference.frames;
  for (size_t k = 0; k < lines.size(); ++k) {
    auto& j = lines[k];
    auto step = k + 1;
    auto at_step = "step " + std::to_string(step);
    if (k >= ref.size())
      return fail(step, at_step + ": the reference ends after " +
                          std::to_string(ref.size()) + " steps (2(N-1) for " +
                          std::to_string(cfg.ranks) + " ranks)");
    auto& want = ref[k];
    ring_frame got;
    got.phase = want.phase;
    got.step = want.step;
    auto phase = j.value("phase", std::string{});
    if (phase != collective::to_string(want.phase))
      return fail(step, at_step + " is in phase '" + phase +
                          "', the reference in '" +
                          collective::to_string(want.phase) + "'");
    auto& ranks = j["ranks"];
    if (!ranks.is_array() || ranks.size() != cfg.ranks)
      return fail(step, at_step + " has another number of ranks than step 1");
    for (size_t r = 0; r < cfg.ranks; ++r) {
      auto& x = ranks[r];
      collective::ring_step st;
      st.phase = want.phase;
      st.step = want.step;
      st.send_chunk = x.value("sent_chunk", size_t{0});
      st.recv_chunk = x.value("received_chunk", size_t{0});
      got.ranks.push_back(st);
      std::vector<float> buf;
      if (x.contains("buffer") && x["buffer"].is_array())
        for (auto& e : x["buffer"])
          buf.push_back(e.is_number() ? e.get<float>() : NAN);
      got.buffers.push_back(buf);
    }
    v.recorded.push_back(got);
    for (size_t r = 0; r < cfg.ranks; ++r) {
      auto who = at_step + " (" + phase + "), rank " + std::to_string(r);
      if (got.ranks[r].send_chunk != want.ranks[r].send_chunk)
        return fail(step, who + " sent chunk " +
                            std::to_string(got.ranks[r].send_chunk) +
                            "; the ring sends chunk " +
                            std::to_string(want.ranks[r].send_chunk));
      if (got.ranks[r].recv_chunk != want.ranks[r].recv_chunk)
        return fail(step, who + " received chunk " +
                            std::to_string(got.ranks[r].recv_chunk) +
                            "; the ring delivers chunk " +
                            std::to_string(want.ranks[r].recv_chunk));
      if (got.buffers[r] != want.buffers[r])
        return fail(step, who + " holds " + join(got.buffers[r]) +
                            "; the reference holds " + join(want.buffers[r]));
    }
  }
  if (lines.size() < ref.size())
    return fail(lines.size() + 1,
                "the run stops after " + std::to_string(lines.size()) +
                  " steps; the ring takes " + std::to_string(ref.size()));
  v.matches = true;
  v.what = "every step matches the reference";
  return v;
}

replay_verdict compare_runs(const std::string& reference,
                            const std::string& recorded, double tolerance) {
  replay_verdict v;
  auto fail = [&](size_t step, std::string what) {
    v.first_bad = step;
    v.what = std::move(what);
    return v;
  };
  std::vector<nlohmann::ordered_json> want, got;
  if (auto bad = parse_lines(reference, want); bad > 0)
    return fail(0, "the reference run is damaged at line " +
                     std::to_string(bad) + "; rebuild the playground");
  if (auto bad = parse_lines(recorded, got); bad > 0)
    return fail(bad, "line " + std::to_string(bad) +
                       " is not a JSON object; load the output of `lumen "
                       "exercises run ID --step=json`");
  v.steps = got.size();
  if (got.empty())
    return fail(0, "the file holds no steps; load the output of `lumen "
                   "exercises run ID --step=json`");
  for (size_t k = 0; k < std::min(want.size(), got.size()); ++k)
    if (auto d = difference(want[k], got[k], "", tolerance); !d.empty())
      return fail(k + 1, "step " + std::to_string(k + 1) + ": " + d);
  if (got.size() != want.size())
    return fail(std::min(want.size(), got.size()) + 1,
                "the run has " + std::to_string(got.size()) +
                  " steps, the reference " + std::to_string(want.size()));
  v.matches = true;
  v.what = "every step matches the reference";
  return v;
}

} // namespace lumen::ml::sim
