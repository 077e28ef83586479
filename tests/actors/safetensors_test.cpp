#define BOOST_TEST_MODULE safetensors
#include <boost/test/unit_test.hpp>

// Checkpoints as safetensors files: the layout the format specifies (read
// here by hand, as numpy or PyTorch would), round trips of every dtype,
// damaged files refused naming the damage, and a parameter server's
// weights, version and optimizer state restored exactly.

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <lumen/errors.hpp>
#include <lumen/ml.hpp>

#include "ps_configs.hpp"

using namespace lumen::ml;

namespace {

std::string temp_path(const std::string& name) {
  return "/tmp/lumen-safetensors-" + std::to_string(::getpid()) + "-" + name;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

void write_all(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A file of `header` (as given) and `data` bytes.
void write_raw(const std::string& path, const std::string& header,
               size_t data) {
  std::vector<char> bytes(8);
  uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + data);
  write_all(path, bytes);
}

template <class Load = safetensors_file (*)(const std::string&)>
void expect_refused(const std::string& path, const std::string& says,
                    Load load = load_safetensors) {
  try {
    load(path);
    BOOST_ERROR("a damaged file was read: " << says);
  } catch (const data_error& e) {
    BOOST_TEST(std::string{e.what()}.find(says) != std::string::npos, e.what());
    BOOST_TEST(std::string{e.what()}.find(path) != std::string::npos);
    // A file that is not there is told apart from one that is damaged.
    auto missing = says == "cannot be opened";
    BOOST_TEST(lumen::to_string(e.code()) ==
               (missing ? "missing_file" : "bad_file"));
  }
}

/// The JSON header of a file's bytes; `n` is set to its length.
nlohmann::json header_of(const std::vector<char>& bytes, uint64_t& n) {
  std::memcpy(&n, bytes.data(), 8);
  return nlohmann::json::parse(bytes.begin() + 8,
                               bytes.begin() + 8 + static_cast<long>(n));
}

safetensors_file sample() {
  safetensors_file f;
  tensor w({2, 3});
  for (size_t i = 0; i < 6; ++i)
    w.data<float>()[i] = static_cast<float>(i) * 0.5f;
  tensor ids({3}, dtype::int64);
  ids.data<int64_t>()[2] = int64_t{1} << 40;
  f.tensors.emplace("weights", w);
  f.tensors.emplace("ids", ids);
  f.tensors.emplace("empty", tensor({0}, dtype::float64));
  f.metadata["version"] = "7";
  return f;
}

} // namespace

BOOST_AUTO_TEST_SUITE(safetensors_suite)

BOOST_AUTO_TEST_CASE(the_layout_is_the_formats) {
  auto path = temp_path("layout");
  save_safetensors(path, sample());
  auto bytes = read_all(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  BOOST_TEST(n % 8 == 0u); // the tensors start aligned
  auto header = nlohmann::json::parse(bytes.begin() + 8,
                                      bytes.begin() + 8 + static_cast<long>(n));
  BOOST_TEST(header["weights"]["dtype"] == "F32");
  BOOST_TEST((header["weights"]["shape"] == nlohmann::json{2, 3}));
  BOOST_TEST(header["ids"]["dtype"] == "I64");
  BOOST_TEST(header["__metadata__"]["version"] == "7");
  auto range = header["weights"]["data_offsets"].get<std::vector<size_t>>();
  BOOST_TEST(range[1] - range[0] == 24u);
  float third;
  std::memcpy(&third, bytes.data() + 8 + n + range[0] + 2 * sizeof(float),
              sizeof third);
  BOOST_TEST(third == 1.0f);
  BOOST_TEST(bytes.size() == 8 + n + 24 + 24);
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(every_dtype_comes_back_as_it_went) {
  auto path = temp_path("round");
  auto f = sample();
  save_safetensors(path, f);
  auto back = load_safetensors(path);
  BOOST_TEST(back.tensors.size() == 3u);
  for (auto& [name, t] : f.tensors)
    BOOST_CHECK(back.tensors.at(name) == t);
  BOOST_TEST(back.metadata.at("version") == "7");
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(damaged_files_are_refused_naming_the_damage) {
  auto path = temp_path("damaged");
  expect_refused(path, "cannot be opened");
  write_all(path, {'a', 'b'});
  expect_refused(path, "shorter than the 8-byte header length");
  save_safetensors(path, sample());
  auto whole = read_all(path);
  write_all(path, {whole.begin(), whole.end() - 5});
  expect_refused(path, "lies outside the file's");
  write_raw(path, std::string(16, 'x'), 0);
  expect_refused(path, "malformed JSON header");
  write_raw(path,
            R"({"a": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}})",
            2);
  expect_refused(path, "dtype 'BF16'");
  write_raw(path,
            R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
            R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
            8);
  expect_refused(path, "overlap or leave a gap");
  write_raw(path,
            R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
            8);
  expect_refused(path, "needs 12 bytes");
  write_raw(path,
            R"({"a": {"dtype": "F32", "shape": "x", "data_offsets": [0, 4]}})",
            4);
  expect_refused(path, "wrong form");
  std::vector<char> huge(16, 0);
  huge[7] = 1; // 2^56 bytes of header
  write_all(path, huge);
  expect_refused(path, "truncated or not a safetensors file");
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(a_server_restores_its_weights_version_and_optimizer) {
  auto cfg = lumen::test::sgd_config(ps_mode::sync, 1, 0.01f);
  cfg.optimizer.kind = optimizer_kind::adam;
  ps_core a{cfg, {1.0f, -1.0f, 0.5f}};
  std::vector<float> g{0.3f, -0.2f, 1.0f};
  for (int i = 0; i < 5; ++i)
    a.push(a.version(), g.data(), 3);
  auto path = temp_path("server");
  save_checkpoint(a, path);
  ps_core b{cfg, {0.0f, 0.0f, 0.0f}};
  restore_checkpoint(b, path);
  BOOST_TEST(b.version() == 5u);
  BOOST_TEST(b.weights() == a.weights());
  // The same next step on both: Adam's moments and step count came back.
  a.push(5, g.data(), 3);
  b.push(5, g.data(), 3);
  BOOST_TEST(b.weights() == a.weights());
  // Checkpoints that do not fit leave the server as it was.
  auto sgd = lumen::test::sgd_config(ps_mode::sync, 1);
  ps_core other{sgd, {0.0f, 0.0f, 0.0f}};
  BOOST_CHECK_THROW(restore_checkpoint(other, path), lumen::usage_error);
  ps_core small{cfg, {0.0f, 0.0f}};
  BOOST_CHECK_THROW(restore_checkpoint(small, path), lumen::usage_error);
  BOOST_TEST(small.version() == 0u);
  BOOST_TEST((small.weights() == std::vector<float>{0.0f, 0.0f}));
  safetensors_file foreign;
  foreign.tensors.emplace("weights", tensor::from(a.weights()));
  save_safetensors(path, foreign);
  BOOST_CHECK_THROW(restore_checkpoint(b, path), data_error);
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(a_model_file_rebuilds_the_model_from_the_file_alone) {
  model_spec spec{"mlp", 4, {3}, 2};
  auto net = make_model(spec);
  model_file f{spec, net->init(7), {}, {{"input_mean", "0.5"}}};
  f.extra["optimizer.velocity"] = tensor::from(std::vector<float>{1, 2});
  auto path = temp_path("model");
  save_model_file(path, f);
  // As numpy would read it: one tensor per layer, [in, out], named so.
  auto bytes = read_all(path);
  uint64_t n = 0;
  auto header = header_of(bytes, n);
  BOOST_TEST((header["layers.0.weight"]["shape"] == nlohmann::json{4, 3}));
  BOOST_TEST((header["layers.0.bias"]["shape"] == nlohmann::json{3}));
  BOOST_TEST((header["layers.1.weight"]["shape"] == nlohmann::json{3, 2}));
  BOOST_TEST(header["__metadata__"]["architecture"] == "4-3-2");
  BOOST_TEST(header["__metadata__"]["lumen.model"] == "mlp");
  BOOST_TEST(header["__metadata__"]["input_mean"] == "0.5");
  auto range =
    header["layers.0.bias"]["data_offsets"].get<std::vector<size_t>>();
  float first_bias = 1;
  std::memcpy(&first_bias, bytes.data() + 8 + n + range[0], sizeof first_bias);
  BOOST_TEST(first_bias == f.params[12]); // after W's 4 x 3
  auto back = load_model_file(path);
  BOOST_TEST(back.spec.kind == "mlp");
  BOOST_TEST(back.spec.dim == 4u);
  BOOST_TEST((back.spec.hidden == std::vector<uint64_t>{3}));
  BOOST_TEST(back.spec.classes == 2u);
  BOOST_TEST(back.params == f.params);
  BOOST_TEST(back.metadata == f.metadata);
  BOOST_CHECK(back.extra.at("optimizer.velocity") ==
              f.extra.at("optimizer.velocity"));
  for (auto* kind : {"softmax_regression", "linear_regression"}) {
    model_spec other{kind, 5, {}, 3};
    model_file g{other, make_model(other)->init(1), {}, {}};
    g.params.back() = 0.25f;
    save_model_file(path, g);
    auto again = load_model_file(path);
    BOOST_TEST(again.spec.kind == kind);
    BOOST_TEST(again.params == g.params);
  }
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(model_files_that_do_not_fit_are_refused) {
  model_spec spec{"mlp", 4, {3}, 2};
  model_file f{spec, std::vector<float>(5), {}, {}};
  auto path = temp_path("bad-model");
  BOOST_CHECK_THROW(save_model_file(path, f), lumen::usage_error);
  f.params = make_model(spec)->init(1);
  f.extra["layers.9.weight"] = tensor::from(std::vector<float>{1});
  BOOST_CHECK_THROW(save_model_file(path, f), lumen::usage_error);
  f.extra.clear();
  save_model_file(path, f);
  auto file = load_safetensors(path);
  // The file with one thing changed is refused, saying so.
  auto refused = [&](auto change, const std::string& says) {
    auto damaged = file;
    change(damaged);
    save_safetensors(path, damaged);
    expect_refused(path, says, load_model_file);
  };
  refused([](auto& d) { d.tensors.erase("layers.1.bias"); },
          "no tensor layers.1.bias");
  refused(
    [](auto& d) {
      d.tensors["layers.0.weight"] = tensor{{3, 4}};
    },
    "layers.0.weight is float32[3, 4]");
  refused([](auto& d) { d.metadata.erase("architecture"); },
          "no \"lumen.model\" or \"architecture\"");
  refused([](auto& d) { d.metadata["architecture"] = "4-x-2"; },
          "is not widths joined by");
  refused(
    [](auto& d) {
      d.tensors["layers.2.weight"] = tensor{{2, 2}};
    },
    "beyond the 4-3-2 architecture");
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(a_flipped_bit_anywhere_in_a_tensor_is_named) {
  model_spec spec{"mlp", 4, {3}, 2};
  model_file f{spec, make_model(spec)->init(3), {}, {{"epochs_done", "1"}}};
  f.extra["optimizer.velocity"] =
    tensor::from(std::vector<float>(f.params.size(), 0.5f));
  auto path = temp_path("flipped");
  save_model_file(path, f);
  auto whole = read_all(path);
  uint64_t n = 0;
  auto header = header_of(whole, n);
  size_t tensors = 0;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__")
      continue;
    ++tensors;
    auto range = entry["data_offsets"].get<std::vector<size_t>>();
    // The first, a middle and the last byte, one bit each: all refused.
    for (auto at : {range[0], (range[0] + range[1]) / 2, range[1] - 1})
      for (int bit : {0, 7}) {
        auto damaged = whole;
        damaged[8 + n + at] ^= static_cast<char>(1 << bit);
        write_all(path, damaged);
        expect_refused(path,
                       "tensor '" + name + "' does not match its checksum",
                       load_model_file);
      }
  }
  BOOST_TEST(tensors == 5u); // four layers' tensors and the velocity
  // The metadata has a checksum too: an epoch count changed is damage.
  auto text = std::string(whole.begin() + 8, whole.begin() + 8 + long(n));
  auto at = text.find("\"epochs_done\":\"1\"");
  BOOST_REQUIRE(at != std::string::npos);
  auto damaged = whole;
  damaged[8 + at + 15] = '7';
  write_all(path, damaged);
  expect_refused(path, "its metadata does not match its checksum",
                 load_model_file);
  // The checksums are the format's own: a reader gets its metadata back
  // as it was given.
  write_all(path, whole);
  BOOST_TEST(load_model_file(path).metadata == f.metadata);
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(a_model_of_nan_or_infinity_is_refused_at_load) {
  model_spec spec{"mlp", 4, {3}, 2};
  auto path = temp_path("non-finite");
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    model_file f{spec, make_model(spec)->init(3), {}, {}};
    f.params[13] = bad; // the first layer's second bias
    save_model_file(path, f);
    expect_refused(path, "tensor layers.0.bias holds", load_model_file);
    f.params[13] = 0;
    f.extra["optimizer.velocity"] = tensor::from(std::vector<float>{0, bad, 0});
    save_model_file(path, f);
    expect_refused(path, "tensor optimizer.velocity holds", load_model_file);
  }
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(files_of_other_writers_without_checksums_are_read) {
  // As numpy's or PyTorch's writer leaves them: no checksums, read as is.
  auto path = temp_path("foreign");
  write_raw(path,
            R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
            R"( "__metadata__": {"format": "pt"}})",
            8);
  auto f = load_safetensors(path);
  BOOST_TEST(f.tensors.at("a").numel() == 2u);
  BOOST_TEST(f.metadata.at("format") == "pt");
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(a_save_that_cannot_finish_leaves_the_old_file_whole) {
  // A 64 KiB tmpfs: the first file fits, a larger one does not.
  auto dir = temp_path("full-disk");
  BOOST_REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  auto mount = "mount -t tmpfs -o size=64k tmpfs " + dir;
  BOOST_REQUIRE_MESSAGE(std::system(mount.c_str()) == 0,
                        "this test mounts a tmpfs, as root");
  auto path = dir + "/model.safetensors";
  auto small = sample();
  save_safetensors(path, small);
  auto big = sample();
  big.tensors["weights"] = tensor({256, 256});
  try {
    save_safetensors(path, big);
    BOOST_ERROR("a file larger than the disk was saved");
  } catch (const data_error& e) {
    BOOST_TEST(std::string{e.what()}.find("No space left on device") !=
                 std::string::npos,
               e.what());
    BOOST_TEST(lumen::to_string(e.code()) == "write_failed");
  }
  auto back = load_safetensors(path); // the first file, whole
  BOOST_CHECK(back.tensors.at("weights") == small.tensors.at("weights"));
  int files = 0;
  for (auto* d = ::opendir(dir.c_str()); d != nullptr;) {
    auto* e = ::readdir(d);
    if (e == nullptr) {
      ::closedir(d);
      break;
    }
    files += e->d_name[0] != '.';
  }
  BOOST_TEST(files == 1); // no temporary left behind
  BOOST_TEST(std::system(("umount " + dir).c_str()) == 0);
  ::rmdir(dir.c_str());
}

BOOST_AUTO_TEST_SUITE_END()
