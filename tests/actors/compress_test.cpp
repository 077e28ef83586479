#define BOOST_TEST_MODULE compress
#include <boost/test/unit_test.hpp>

// Gradient compression: sizes against fp32, each codec's error bound,
// values no codec may take, damaged messages, and error feedback carrying
// what a step lost into the next; the wire form, whose byte block must be
// the length its codec says.

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

BOOST_AUTO_TEST_SUITE_END()
