#define BOOST_TEST_MODULE compress
#include <boost/test/unit_test.hpp>

// Gradient compression: sizes against fp32, each codec's error bound,
// values no codec may take, damaged messages, and error feedback carrying
// what a step lost into the next; the wire form, whose byte block must be
// the length its codec says.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <lumen/errors.hpp>
#include <lumen/ml.hpp>

using namespace lumen::ml;

namespace {

std::vector<float> gradient(size_t n, uint64_t seed, float spread = 1.0f) {
  std::mt19937_64 gen{seed};
  std::normal_distribution<float> normal{0.0f, spread};
  std::vector<float> g(n);
  for (auto& x : g)
    x = normal(gen);
  return g;
}

std::vector<float> round_trip(const std::vector<float>& g, codec c) {
  std::vector<float> back(g.size());
  decompress(compress(g.data(), g.size(), c), back.data(), back.size());
  return back;
}

} // namespace

BOOST_AUTO_TEST_SUITE(compress_suite)

BOOST_AUTO_TEST_CASE(sizes_are_half_and_about_a_quarter_of_fp32) {
  const size_t n = 235146; // the MLP's gradient
  auto fp32 = static_cast<double>(compressed_size(codec::none, n));
  BOOST_TEST(compressed_size(codec::fp16, n) / fp32 == 0.5);
  auto int8 = compressed_size(codec::int8, n) / fp32;
  BOOST_TEST_MESSAGE("int8, scales counted: " << int8 << " of fp32");
  BOOST_TEST(int8 <= 0.27);
  auto g = gradient(n, 1);
  BOOST_TEST(compress(g.data(), n, codec::int8).bytes.size() ==
             compressed_size(codec::int8, n));
}

BOOST_AUTO_TEST_CASE(each_codec_stays_within_its_error_bound) {
  auto g = gradient(1000, 2, 3.0f);
  BOOST_TEST(round_trip(g, codec::none) == g);
  auto half = round_trip(g, codec::fp16);
  for (size_t i = 0; i < g.size(); ++i) // 11 significant bits
    BOOST_TEST(std::abs(half[i] - g[i]) <= std::abs(g[i]) * 0x1p-11f + 6e-8f);
  auto q = round_trip(g, codec::int8);
  for (size_t b = 0; b < g.size(); b += int8_block) {
    float top = 0;
    for (size_t i = b; i < std::min(g.size(), b + int8_block); ++i)
      top = std::max(top, std::abs(g[i]));
    for (size_t i = b; i < std::min(g.size(), b + int8_block); ++i)
      BOOST_TEST(std::abs(q[i] - g[i]) <= top / 127 / 2 * 1.0001f,
                 "value " << i);
  }
  std::vector<float> zeros(300, 0.0f);
  BOOST_TEST(round_trip(zeros, codec::int8) == zeros);
  BOOST_TEST(round_trip(std::vector<float>{}, codec::int8).empty());
}

BOOST_AUTO_TEST_CASE(nan_inf_and_values_past_fp16_are_refused) {
  auto check = [](std::vector<float> g, codec c, const std::string& text) {
    try {
      compress(g.data(), g.size(), c);
      BOOST_ERROR("no error for " << text);
    } catch (const lumen::usage_error& e) {
      BOOST_TEST(std::string{e.what()}.find(text) != std::string::npos,
                 e.what());
    }
  };
  check({1.0f, std::numeric_limits<float>::quiet_NaN()}, codec::int8,
        "value 1");
  check({std::numeric_limits<float>::infinity()}, codec::none, "finite");
  check({70000.0f}, codec::fp16, "65504");
  std::vector<float> ok{70000.0f};
  BOOST_TEST(std::abs(round_trip(ok, codec::int8)[0] - 70000.0f) < 1.0f);
}

BOOST_AUTO_TEST_CASE(damaged_messages_are_refused) {
  auto g = gradient(600, 3);
  auto c = compress(g.data(), g.size(), codec::int8);
  std::vector<float> out(g.size());
  BOOST_CHECK_THROW(decompress(c, out.data(), 599), lumen::usage_error);
  auto cut = c;
  cut.bytes.pop_back();
  BOOST_CHECK_THROW(decompress(cut, out.data(), out.size()),
                    lumen::usage_error);
  auto unknown = c;
  unknown.kind = static_cast<codec>(7);
  BOOST_CHECK_THROW(decompress(unknown, out.data(), out.size()),
                    lumen::usage_error);
  BOOST_CHECK_THROW(compress(g.data(), g.size(), static_cast<codec>(7)),
                    lumen::usage_error);
  auto bad_scale = c;
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bad_scale.bytes.data(), &nan, sizeof(nan));
  BOOST_CHECK_THROW(decompress(bad_scale, out.data(), out.size()),
                    lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(error_feedback_carries_what_each_step_lost) {
  // Over many steps, what was sent sums to what the gradients sum to,
  // give or take the last step's loss; without feedback the error grows.
  const size_t n = 512;
  error_feedback ef;
  std::vector<double> sent(n, 0), truth(n, 0), plain(n, 0);
  std::vector<float> back(n);
  for (int step = 0; step < 200; ++step) {
    auto g = gradient(n, 100 + step, 0.01f);
    g[0] += 1.0f; // one large value: the block's small ones round to zero
    auto wire = ef.encode(g.data(), n, codec::int8);
    decompress(wire, back.data(), n);
    auto lossy = round_trip(g, codec::int8);
    for (size_t i = 0; i < n; ++i) {
      sent[i] += back[i];
      truth[i] += g[i];
      plain[i] += lossy[i];
      // The residual is exactly what this step did not send.
      if (step == 199)
        BOOST_TEST(std::abs(truth[i] - sent[i] - ef.residual()[i]) < 1e-3);
    }
  }
  double with = 0, without = 0;
  for (size_t i = 1; i < n; ++i) {
    with = std::max(with, std::abs(truth[i] - sent[i]));
    without = std::max(without, std::abs(truth[i] - plain[i]));
  }
  BOOST_TEST_MESSAGE("largest summed error: " << with << " with feedback, "
                                              << without << " without");
  BOOST_TEST(with < 1.0 / 127); // one step's quantization step at most
  BOOST_TEST(without > 5 * with);
}

BOOST_AUTO_TEST_CASE(crosses_caf_as_raw_bytes_and_refuses_lying_lengths) {
  auto g = gradient(1000, 4);
  auto wire = compress(g.data(), g.size(), codec::int8);
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  BOOST_REQUIRE(!sink(wire));
  BOOST_TEST(buf.size() < wire.bytes.size() + 32);
  compressed back;
  caf::binary_deserializer source{nullptr, buf};
  BOOST_REQUIRE(!source(back));
  BOOST_TEST((back.kind == codec::int8));
  BOOST_TEST(back.bytes == wire.bytes);
  // The count says 1000 int8 values; a block of another length is
  // refused before anything is allocated for it.
  compressed lie = wire;
  lie.bytes.resize(10);
  std::vector<char> lied;
  caf::binary_serializer liar{nullptr, lied};
  BOOST_REQUIRE(!liar(lie));
  compressed hostile;
  caf::binary_deserializer reader{nullptr, lied};
  auto err = reader(hostile);
  BOOST_REQUIRE(err);
  BOOST_TEST(caf::to_string(err).find("needs 1016 bytes, the peer announced "
                                      "10") != std::string::npos,
             caf::to_string(err));
}

// Broadcasts: a server's weights going back to its workers as changes.

namespace {

/// Weights that move by up to `step` a value each version, from `seed`.
struct trajectory {
  std::vector<float> w;
  std::mt19937_64 gen;
  float step;

  trajectory(size_t n, uint64_t seed, float step)
    : w(gradient(n, seed))
    , gen(seed + 1)
    , step(step) {}

  tensor next() {
    std::uniform_real_distribution<float> move{-step, step};
    for (auto& x : w)
      x += move(gen);
    return tensor::from(w);
  }
};

float max_difference(const std::vector<float>& a, const float* b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_replica_following_changes_stays_within_one_rounding) {
  for (auto c : {codec::fp16, codec::int8}) {
    trajectory t{1000, 7, 0.01f};
    broadcaster caster{c, 0}; // never in full after the first
    std::vector<float> replica(1000), scratch;
    uint64_t held = 0;
    float drift = 0;
    for (uint64_t v = 1; v <= 200; ++v) {
      auto before = t.w;
      auto u = caster.next(v, t.next());
      BOOST_TEST(u.full == (v == 1));
      BOOST_TEST(u.version == v);
      if (!u.full) {
        BOOST_TEST(u.base == v - 1);
        BOOST_TEST(u.payload_bytes() == compressed_size(c, 1000));
      }
      BOOST_REQUIRE(apply_update(u, replica.data(), 1000, held, scratch));
      held = v;
      // The server's drift is this replica's, to the bit: both add the
      // same decompressed change.
      auto d = max_difference(t.w, replica.data());
      BOOST_TEST(caster.drift() == d);
      // One step's rounding (the change includes the last drift, made
      // good now): fp16 keeps 11 bits, int8 half a step of 1/127.
      float change = max_difference(t.w, before.data()) + drift;
      BOOST_TEST(
        d <= (c == codec::fp16 ? 1e-3f : 1.0f / 254) * change * 1.001f + 1e-6f,
        to_string(c) << " version " << v << ": drift " << d);
      drift = d;
    }
    BOOST_TEST(caster.max_drift() > 0.0f);
    BOOST_TEST(caster.max_drift() < 1e-3f);
  }
}

BOOST_AUTO_TEST_CASE(every_kth_version_goes_in_full_and_ends_the_drift) {
  trajectory t{600, 8, 0.05f};
  broadcaster caster{codec::int8, 5};
  std::vector<float> replica(600), scratch;
  for (uint64_t v = 1; v <= 21; ++v) {
    auto u = caster.next(v, t.next());
    BOOST_TEST(u.full == (v == 1 || v % 5 == 0), "version " << v);
    BOOST_REQUIRE(apply_update(u, replica.data(), 600, v - 1, scratch));
    if (u.full) {
      BOOST_TEST(u.payload_bytes() == 600 * sizeof(float));
      BOOST_TEST(caster.drift() == 0.0f);
      BOOST_TEST(replica == t.w);
    } else {
      BOOST_TEST(caster.drift() > 0.0f);
    }
  }
  // Without a codec every update is the weights.
  broadcaster plain{codec::none, 5};
  for (uint64_t v = 1; v <= 3; ++v)
    BOOST_TEST(plain.next(v, t.next()).full);
}

BOOST_AUTO_TEST_CASE(a_change_for_another_replica_or_size_is_not_applied) {
  trajectory t{300, 9, 0.01f};
  broadcaster caster{codec::int8, 0};
  std::vector<float> replica(300), scratch;
  BOOST_REQUIRE(
    apply_update(caster.next(1, t.next()), replica.data(), 300, 0, scratch));
  auto change = caster.next(2, t.next());
  auto kept = replica;
  // A worker whose replica is of version 0 (it missed version 1) pulls.
  BOOST_TEST(!apply_update(change, replica.data(), 300, 0, scratch));
  BOOST_TEST(replica == kept);
  BOOST_CHECK_THROW(apply_update(change, replica.data(), 200, 1, scratch),
                    lumen::usage_error);
  broadcaster other{codec::none, 0};
  auto full = other.next(1, tensor::from(std::vector<float>(200)));
  BOOST_CHECK_THROW(apply_update(full, replica.data(), 300, 0, scratch),
                    lumen::usage_error);
  // A change beyond fp16's range goes in full.
  broadcaster half{codec::fp16, 0};
  std::vector<float> w(10, 1.0f);
  half.next(1, tensor::from(w));
  w[3] = 1e6f;
  BOOST_TEST(half.next(2, tensor::from(w)).full);
}

BOOST_AUTO_TEST_SUITE_END()
