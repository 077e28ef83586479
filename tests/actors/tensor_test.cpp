#define BOOST_TEST_MODULE tensor
#include <boost/test/unit_test.hpp>

#include <limits>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <lumen/detail/codec.hpp>
#include <lumen/ml/tensor.hpp>
#include <lumen/ml/wire.hpp>

using lumen::ml::dtype;
using lumen::ml::tensor;

BOOST_AUTO_TEST_SUITE(tensor_suite)

BOOST_AUTO_TEST_CASE(shape_dtype_and_zeros) {
  tensor t({2, 3}, dtype::float64);
  BOOST_TEST(t.numel() == 6u);
  BOOST_TEST(t.nbytes() == 48u);
  BOOST_TEST(t.describe() == "float64[2, 3]");
  for (double v : t.to_vector<double>())
    BOOST_TEST(v == 0.0);
  BOOST_TEST(tensor{}.numel() == 0u);
  BOOST_CHECK_THROW(tensor({2, -1}), lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(copies_share_storage_and_clone_does_not) {
  auto a = tensor::from(std::vector<float>{1, 2, 3});
  auto b = a;
  b.data<float>()[0] = 10;
  BOOST_TEST(a.data<float>()[0] == 10.0f); // as `b = a` in PyTorch
  auto c = a.clone();
  c.data<float>()[1] = 20;
  BOOST_TEST(a.data<float>()[1] == 2.0f);
  BOOST_TEST((a == b));
  BOOST_TEST(!(a == c));
}

BOOST_AUTO_TEST_CASE(rows_view_in_place_and_a_write_copies_them_first) {
  tensor m({4, 2});
  m.vec<float>() << 0, 1, 2, 3, 4, 5, 6, 7;
  auto mid = m.rows(1, 3);
  BOOST_TEST(mid.is_view());
  BOOST_TEST(mid.describe() == "float32[2, 2]");
  const auto& seen = mid;
  BOOST_TEST(seen.data<float>() == m.data<float>() + 2); // no copy to read
  BOOST_TEST((mid.to_vector<float>() == std::vector<float>{2, 3, 4, 5}));
  mid.data<float>()[0] = 20; // now its own numbers
  BOOST_TEST(!mid.is_view());
  BOOST_TEST(m.data<float>()[2] == 2.0f);
  BOOST_TEST(m.rows(4, 4).numel() == 0u);
  BOOST_CHECK_THROW(m.rows(3, 5), lumen::usage_error);
  BOOST_CHECK_THROW(m.rows(3, 2), lumen::usage_error);
  // A view crosses CAF and the codec as the same bytes as a copy.
  auto view = m.rows(2, 4);
  auto copy = view.clone();
  std::vector<char> a, b;
  caf::binary_serializer sa{nullptr, a}, sb{nullptr, b};
  BOOST_REQUIRE(!sa(view));
  BOOST_REQUIRE(!sb(copy));
  BOOST_TEST((a == b));
  BOOST_TEST((lumen::detail::encode(view) == lumen::detail::encode(copy)));
  BOOST_TEST((view == copy));
}

BOOST_AUTO_TEST_CASE(eigen_maps_in_place) {
  tensor m({2, 2});
  m.mat<float>() << 1, 2, 3, 4;
  BOOST_TEST(m.data<float>()[1] == 2.0f); // row-major
  m.vec<float>() *= 2.0f;
  BOOST_TEST((m.to_vector<float>() == std::vector<float>{2, 4, 6, 8}));
  BOOST_CHECK_THROW(tensor({4}).mat<float>(), lumen::usage_error);
}

BOOST_AUTO_TEST_CASE(the_wrong_element_type_is_a_usage_error) {
  tensor t({3}, dtype::int32);
  BOOST_CHECK_EXCEPTION(
    t.data<float>(), lumen::usage_error, [](const lumen::usage_error& e) {
      return std::string{e.what()}.find("data<int32_t>") != std::string::npos;
    });
}

BOOST_AUTO_TEST_CASE(crosses_the_codec_as_raw_bytes) {
  tensor t({1000, 250}, dtype::float32);
  for (size_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = static_cast<float>(i) * 0.5f;
  auto bytes = lumen::detail::encode(t);
  // dtype, shape (count + dims) and the block: no per-element framing.
  BOOST_TEST(bytes.size() < t.nbytes() + 64);
  auto back = std::get<0>(lumen::detail::decode<tensor>(bytes));
  BOOST_TEST((back == t));
}

BOOST_AUTO_TEST_CASE(bytes_that_lie_about_the_shape_are_refused) {
  tensor t({4, 4});
  auto bytes = lumen::detail::encode(t);
  // The shape's first dimension sits after the dtype byte and the count.
  int64_t lie = 5;
  std::memcpy(bytes.data() + 1 + 8, &lie, sizeof(lie));
  BOOST_CHECK_THROW(lumen::detail::decode<tensor>(bytes), lumen::codec_error);
}

BOOST_AUTO_TEST_CASE(shapes_whose_bytes_overflow_are_refused) {
  BOOST_CHECK_THROW(tensor({int64_t{1} << 62}), lumen::usage_error);
  // On the wire: 2^62 float32 elements are 2^64 bytes, which wraps to 0 in
  // a size_t; the decoder must not take the empty block for them.
  tensor t({0});
  auto bytes = lumen::detail::encode(t);
  int64_t huge = int64_t{1} << 62;
  std::memcpy(bytes.data() + 1 + 8, &huge, sizeof(huge));
  BOOST_CHECK_THROW(lumen::detail::decode<tensor>(bytes), lumen::codec_error);
}

BOOST_AUTO_TEST_CASE(crosses_caf_as_raw_bytes_and_refuses_lying_lengths) {
  tensor t({3, 4}, dtype::int64);
  for (size_t i = 0; i < t.numel(); ++i)
    t.data<int64_t>()[i] = static_cast<int64_t>(i) << 33;
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  BOOST_REQUIRE(!sink(t));
  BOOST_TEST(buf.size() < t.nbytes() + 32);
  tensor back;
  caf::binary_deserializer source{nullptr, buf};
  BOOST_REQUIRE(!source(back));
  BOOST_TEST((back == t));
  // The same header, then a block announced as 2 GiB: refused before
  // anything is allocated for it.
  tensor small({4});
  std::vector<char> lie;
  caf::binary_serializer liar{nullptr, lie};
  BOOST_REQUIRE(!liar(small));
  lie.resize(lie.size() - 17); // the block's length (1 byte) and its data
  std::vector<char> length;
  caf::binary_serializer announcer{nullptr, length};
  size_t announced = size_t{1} << 31;
  BOOST_REQUIRE(!announcer.begin_sequence(announced));
  lie.insert(lie.end(), length.begin(), length.end());
  tensor hostile;
  caf::binary_deserializer reader{nullptr, lie};
  auto err = reader(hostile);
  BOOST_REQUIRE(err);
  BOOST_TEST(caf::to_string(err).find("the peer announced 2147483648") !=
               std::string::npos,
             caf::to_string(err));
}

BOOST_AUTO_TEST_CASE(first_non_finite_finds_the_first_nan_or_infinity) {
  std::vector<float> v(5000, 1.5f);
  BOOST_TEST(lumen::ml::first_non_finite(v.data(), v.size()) == v.size());
  BOOST_TEST(lumen::ml::first_non_finite(v.data(), 0) == 0u);
  v[4097] = std::numeric_limits<float>::infinity();
  v[4999] = std::numeric_limits<float>::quiet_NaN();
  BOOST_TEST(lumen::ml::first_non_finite(v.data(), v.size()) == 4097u);
  v[3] = -std::numeric_limits<float>::infinity();
  BOOST_TEST(lumen::ml::first_non_finite(v.data(), v.size()) == 3u);
  // The largest finite value and denormals are finite.
  std::vector<float> edge{std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(), -0.0f};
  BOOST_TEST(lumen::ml::first_non_finite(edge.data(), edge.size()) ==
             edge.size());
}

BOOST_AUTO_TEST_CASE(cat_joins_along_the_first_dimension) {
  using lumen::ml::tensor;
  auto a = tensor::from(std::vector<float>{1, 2, 3, 4});
  auto b = tensor::from(std::vector<float>{5, 6});
  auto joined = tensor::cat({a.rows(1, 3), b, a.rows(0, 0)});
  BOOST_TEST(joined.shape() == std::vector<int64_t>{4});
  BOOST_TEST(joined.to_vector<float>() == (std::vector<float>{2, 3, 5, 6}));
  BOOST_TEST(!joined.is_view());
  tensor m({2, 3});
  tensor rows3({1, 3});
  rows3.data<float>()[2] = 7;
  auto stacked = tensor::cat({m, rows3});
  BOOST_TEST(stacked.shape() == (std::vector<int64_t>{3, 3}));
  BOOST_TEST(stacked.data<float>()[8] == 7.0f);
  BOOST_CHECK_THROW(tensor::cat({}), lumen::usage_error);
  BOOST_CHECK_THROW(tensor::cat({m, tensor({1, 2})}), lumen::usage_error);
  BOOST_CHECK_THROW(tensor::cat({a, tensor({2}, lumen::ml::dtype::int32)}),
                    lumen::usage_error);
}

BOOST_AUTO_TEST_SUITE_END()
