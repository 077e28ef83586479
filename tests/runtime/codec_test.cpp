#define BOOST_TEST_MODULE codec
#include <boost/test/unit_test.hpp>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <caf/meta/type_name.hpp>

#include <lumen/lumen.hpp>

namespace {

struct tensor {
  uint64_t version = 0;
  std::vector<uint32_t> shape;
  std::vector<float> data;
  friend bool operator==(const tensor& x, const tensor& y) {
    return x.version == y.version && x.shape == y.shape && x.data == y.data;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor& x) {
  return f(caf::meta::type_name("tensor"), x.version, x.shape, x.data);
}

std::string join(const std::vector<std::string>& xs, const std::string& sep) {
  std::string out;
  for (auto& x : xs)
    out += (out.empty() ? "" : sep) + x;
  return out;
}
LUMEN_REMOTE(join);

class Scaler {
public:
  explicit Scaler(float k)
    : k_(k) {}
  std::vector<float> scale(const std::vector<float>& xs) const {
    std::vector<float> out;
    for (auto x : xs)
      out.push_back(k_ * x);
    return out;
  }

private:
  float k_;
};
LUMEN_ACTOR(Scaler, &Scaler::scale);

template <class... Ts>
void check_round_trip(const Ts&... xs) {
  auto bytes = lumen::detail::encode(xs...);
  auto back = lumen::detail::decode<Ts...>(bytes);
  BOOST_CHECK(back == std::make_tuple(xs...));
}

bool mentions(const std::exception& e, const std::string& part) {
  return std::string{e.what()}.find(part) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_SUITE(codec)

BOOST_AUTO_TEST_CASE(values_survive_a_round_trip) {
  check_round_trip(int32_t{-7}, uint64_t{1} << 40, 3.5, true, 'x');
  check_round_trip(std::string{}, std::string{"hello"});
  check_round_trip(std::vector<float>{}, std::vector<float>{1.5f, -2.0f},
                   std::vector<bool>{true, false, true});
  check_round_trip(
    std::map<std::string, std::vector<int>>{{"a", {1, 2}}, {"b", {}}});
  check_round_trip(std::optional<int>{}, std::optional<int>{4},
                   std::make_tuple(1, std::string{"x"}),
                   std::make_pair(2.0f, std::vector<std::string>{"y"}));
  check_round_trip(tensor{3, {2, 2}, {1, 2, 3, 4}});
}

BOOST_AUTO_TEST_CASE(float_vectors_cross_as_one_block_of_raw_bytes) {
  std::vector<float> xs(1000, 0.25f);
  auto bytes = lumen::detail::encode(xs);
  // An 8-byte count, then exactly the payload.
  BOOST_TEST(bytes.size() == 8 + 1000 * sizeof(float));
}

BOOST_AUTO_TEST_CASE(truncated_input_is_a_codec_error) {
  auto bytes = lumen::detail::encode(std::string{"hello"}, 42);
  bytes.resize(bytes.size() - 1);
  BOOST_CHECK_EXCEPTION(
    (lumen::detail::decode<std::string, int>(bytes)), lumen::codec_error,
    [](const lumen::codec_error& e) { return mentions(e, "needed"); });
}

BOOST_AUTO_TEST_CASE(leftover_bytes_are_a_codec_error) {
  auto bytes = lumen::detail::encode(1, 2);
  BOOST_CHECK_EXCEPTION(
    lumen::detail::decode<int>(bytes), lumen::codec_error,
    [](const lumen::codec_error& e) { return mentions(e, "left over"); });
}

BOOST_AUTO_TEST_CASE(a_corrupt_size_does_not_allocate_without_bound) {
  lumen::detail::bytes bytes(8, '\xff'); // a count of 2^64 - 1
  BOOST_CHECK_EXCEPTION(
    lumen::detail::decode<std::vector<double>>(bytes), lumen::codec_error,
    [](const lumen::codec_error& e) { return mentions(e, "claims"); });
  BOOST_CHECK_THROW(lumen::detail::decode<std::string>(bytes),
                    lumen::codec_error);
}

BOOST_AUTO_TEST_CASE(registered_functions_run_from_bytes_by_name) {
  auto entry = lumen::detail::find_function("join");
  BOOST_REQUIRE(entry != nullptr);
  auto args =
    lumen::detail::encode(std::vector<std::string>{"a", "b"}, std::string{"+"});
  auto out = entry->invoke(entry->fn, lumen::detail::span_of(args));
  BOOST_TEST(std::get<0>(lumen::detail::decode<std::string>(out)) == "a+b");
  auto wrong = lumen::detail::encode(1);
  BOOST_CHECK_THROW(entry->invoke(entry->fn, lumen::detail::span_of(wrong)),
                    lumen::codec_error);
}

BOOST_AUTO_TEST_CASE(registered_methods_and_constructors_run_from_bytes) {
  // Instantiates the constructor registration, as lumen::actor<Scaler>(2.f)
  // does in any program that creates such an actor.
  static_cast<void>(
    lumen::detail::constructor_registration<Scaler, float>::done);
  auto ctor = lumen::detail::find_constructor(
    lumen::detail::constructor_key<Scaler, float>());
  BOOST_REQUIRE(ctor != nullptr);
  auto obj = ctor->construct(lumen::detail::encode(2.0f));
  auto cls = lumen::detail::find_actor_class("Scaler");
  BOOST_REQUIRE(cls != nullptr);
  auto m = cls->find("Scaler::scale");
  BOOST_REQUIRE(m != nullptr);
  auto in = lumen::detail::encode(std::vector<float>{1, 2});
  auto out = m->invoke(obj.get(), m->key, lumen::detail::span_of(in));
  BOOST_TEST(std::get<0>(lumen::detail::decode<std::vector<float>>(out)) ==
             (std::vector<float>{2, 4}));
  BOOST_TEST(cls->find("Scaler::nope") == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()
