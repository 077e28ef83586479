#include "lumen/ml/data.hpp"

#include <malloc.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>

#include <lumen/node_shared.hpp>

namespace lumen::ml {

namespace {

constexpr uint32_t idx_unsigned_bytes = 0x08;

/// Fashion-MNIST's file of `what` ("images-idx3", "labels-idx1") for a
/// split, in `dir`.
std::string fashion_file(split which, const std::string& dir,
                         const char* what) {
  return dir + "/" + (which == split::train ? "train" : "t10k") + "-" + what +
         "-ubyte.gz";
}

/// gzread reads plain files too, so one reader serves both.
struct gz_closer {
  void operator()(gzFile f) const {
    gzclose(f);
  }
};

[[noreturn]] void bad_file(const std::string& path, const std::string& what,
                           errc code = errc::bad_file) {
  throw data_error("cannot use " + path + ": " + what, code);
}

/// Reads exactly `n` bytes, or throws `data_error` for a file cut short
/// or damaged; they are bytes `at` on of a part of `whole` bytes (the
/// message counts in it).
void read_exactly(gzFile f, const std::string& path, void* into, size_t n,
                  const char* what, size_t at = 0, size_t whole = 0) {
  auto out = static_cast<char*>(into);
  size_t got = 0;
  while (got < n) {
    auto chunk = static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30));
    int k = gzread(f, out + got, chunk);
    if (k < 0) {
      int code = 0;
      bad_file(path, std::string{"its compressed data is damaged ("} +
                       gzerror(f, &code) + ")");
    }
    if (k == 0)
      break;
    got += static_cast<size_t>(k);
  }
  if (got < n)
    bad_file(path, "it is truncated: " + std::to_string(at + got) + " of the " +
                     std::to_string(whole > 0 ? whole : n) + " bytes of its " +
                     what + " are there; download or reinstall it");
}

uint32_t big_endian(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

} // namespace

idx_file read_idx(const std::string& path, size_t rows) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    bad_file(path, "it does not exist", errc::missing_file);
  std::unique_ptr<gzFile_s, gz_closer> f{gzopen(path.c_str(), "rb")};
  if (!f)
    bad_file(path, std::string{"it cannot be opened: "} + std::strerror(errno),
             errc::missing_file);
  unsigned char head[4];
  if (gzread(f.get(), head, 1) == 0)
    bad_file(path, "it is empty");
  read_exactly(f.get(), path, head + 1, 3, "header");
  if (head[0] != 0 || head[1] != 0 || head[2] != idx_unsigned_bytes ||
      head[3] == 0 || head[3] > 4)
    bad_file(path, "it is not an IDX file of unsigned bytes (its first four "
                   "bytes should be 0 0 8 and a rank of 1 to 4)");
  idx_file out;
  size_t total = 1;
  for (int i = 0; i < head[3]; ++i) {
    unsigned char d[4];
    read_exactly(f.get(), path, d, 4, "header");
    out.dims.push_back(big_endian(d));
    constexpr size_t limit = size_t{1} << 33;
    if (out.dims.back() != 0 && total > limit / out.dims.back())
      bad_file(path, "its dimensions claim more than 8 GiB");
    total *= out.dims.back();
  }
  size_t kept = total;
  if (rows < out.dims[0]) {
    kept = total / out.dims[0] * rows;
    out.dims[0] = static_cast<uint32_t>(rows);
  }
  out.bytes.resize(kept);
  read_exactly(f.get(), path, out.bytes.data(), kept, "data", 0, total);
  // The rows not kept pass through a small buffer: the file's length and
  // its gzip checksum are checked all the same.
  std::vector<char> rest(std::min<size_t>(total - kept, 1 << 16));
  for (size_t at = kept; at < total;) {
    auto n = std::min(total - at, rest.size());
    read_exactly(f.get(), path, rest.data(), n, "data", at, total);
    at += n;
  }
  char extra;
  int tail = gzread(f.get(), &extra, 1);
  if (tail > 0)
    bad_file(path, "it holds more bytes than its dimensions say");
  if (tail < 0) // the gzip trailer's length or checksum is wrong
    bad_file(path, "its compressed data is damaged");
  return out;
}

namespace {

/// A split's two files, read and checked against each other.
struct fashion_files {
  std::string images_path, labels_path;
  idx_file images, labels;

  size_t rows() const noexcept {
    return images.dims[0];
  }
};

fashion_files read_fashion(split which, const std::string& dir,
                           size_t rows = SIZE_MAX) {
  fashion_files f;
  f.images_path = fashion_file(which, dir, "images-idx3");
  f.labels_path = fashion_file(which, dir, "labels-idx1");
  struct stat st {};
  for (auto& path : {f.images_path, f.labels_path})
    if (::stat(path.c_str(), &st) != 0)
      throw data_error("Fashion-MNIST is not in " + dir + " (" + path +
                         " is missing): install Debian's package, apt-get "
                         "install dataset-fashion-mnist, or pass the "
                         "directory that holds the files",
                       errc::missing_file);
  f.images = read_idx(f.images_path, rows);
  f.labels = read_idx(f.labels_path, rows);
  auto& images = f.images;
  auto& labels = f.labels;
  if (images.dims.size() != 3 || images.dims[1] != 28 || images.dims[2] != 28)
    bad_file(f.images_path, "it does not hold 28x28 images");
  if (labels.dims.size() != 1 || labels.dims[0] != images.dims[0])
    bad_file(f.labels_path,
             "it has " +
               std::to_string(labels.dims.empty() ? 0 : labels.dims[0]) +
               " labels for the " + std::to_string(images.dims[0]) +
               " images of " + f.images_path);
  return f;
}

/// The rows()·784 features, (pixel / 255 − mean) / stddev in floats (as
/// standardize() gives them, to the bit), and the labels.
void decode(const fashion_files& f, float* x, int32_t* y, float mean,
            float stddev) {
  auto& pixels = f.images.bytes;
  for (size_t i = 0; i < pixels.size(); ++i)
    x[i] = (pixels[i] / 255.0f - mean) / stddev;
  for (size_t i = 0; i < f.rows(); ++i) {
    auto label = f.labels.bytes[i];
    if (label > 9)
      bad_file(f.labels_path, "label " + std::to_string(label) + " at row " +
                                std::to_string(i) + " is not a class (0-9)");
    y[i] = label;
  }
}

/// Frees the files' bytes once they are decoded, back to the system:
/// freed alone they stayed in the heap, 47 MB of the training split's
/// images in every process that read them.
void let_go(std::unique_ptr<fashion_files> f) {
  f.reset();
  ::malloc_trim(0);
}

} // namespace

dataset load_fashion_mnist(split which, const std::string& dir) {
  return load_fashion_mnist(which, SIZE_MAX, dir);
}

dataset load_fashion_mnist(split which, size_t rows, const std::string& dir) {
  if (rows == 0)
    throw usage_error("load_fashion_mnist: asked for 0 rows; give 1 or more");
  auto f = std::make_unique<fashion_files>(read_fashion(which, dir, rows));
  if (rows != SIZE_MAX && f->rows() < rows)
    throw usage_error("load_fashion_mnist: asked for " + std::to_string(rows) +
                      " rows of the " +
                      (which == split::train ? "training" : "test") +
                      " split, which has " + std::to_string(f->rows()) +
                      "; give 1 to " + std::to_string(f->rows()));
  auto n = static_cast<int64_t>(f->rows());
  dataset out;
  out.features = tensor({n, 784});
  out.labels = tensor({n}, dtype::int32);
  decode(*f, out.features.data<float>(), out.labels.data<int32_t>(), 0, 1);
  let_go(std::move(f));
  return out;
}

dataset node_fashion_mnist(split which, float mean, float stddev,
                           const std::string& dir) {
  if (!(stddev > 0))
    throw usage_error("node_fashion_mnist: stddev must be positive");
  auto images_path = fashion_file(which, dir, "images-idx3");
  // Another version of the files, or other scaling, is another block.
  struct stat st {};
  auto version = ::stat(images_path.c_str(), &st) == 0
                   ? std::to_string(st.st_size) + "-" +
                       std::to_string(st.st_mtime) + "-" +
                       std::to_string(st.st_ino)
                   : std::string{"missing"};
  char scaling[64];
  std::snprintf(scaling, sizeof(scaling), "%a_%a", mean, stddev);
  std::string name = std::string{"fashion-mnist."} +
                     (which == split::train ? "train." : "test.") + version +
                     "." + scaling;
  for (auto& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-')
      c = '_';
  // Kept mapped until the process ends: the next run in it (a second
  // fit() on this node) maps the block at once instead of making it anew.
  // One lock a name, so that two splits are made side by side.
  struct kept_block {
    std::mutex mtx;
    std::shared_ptr<const shared_block> block;
  };
  static std::mutex kept_mtx;
  static std::map<std::string, std::shared_ptr<kept_block>> kept;
  std::shared_ptr<kept_block> entry;
  {
    std::lock_guard<std::mutex> guard{kept_mtx};
    auto& e = kept[name];
    if (!e)
      e = std::make_shared<kept_block>();
    entry = e;
  }
  std::shared_ptr<const shared_block> block;
  {
    std::lock_guard<std::mutex> guard{entry->mtx};
    if (!entry->block) {
      // The block: rows (u64), then the features, then the labels, written
      // in place as they are decoded (the maker's process alone reads the
      // files).
      auto f = std::make_unique<fashion_files>();
      entry->block = lumen::node_shared(
        name,
        [&] {
          *f = read_fashion(which, dir);
          return sizeof(uint64_t) + f->rows() * (784 * 4 + 4);
        },
        [&](char* out) {
          uint64_t rows = f->rows();
          std::memcpy(out, &rows, sizeof(rows));
          auto* x = reinterpret_cast<float*>(out + sizeof(rows));
          decode(*f, x, reinterpret_cast<int32_t*>(x + rows * 784), mean,
                 stddev);
        });
      let_go(std::move(f));
    }
    block = entry->block;
  }
  uint64_t rows = 0;
  if (block->size() >= sizeof(rows))
    std::memcpy(&rows, block->data(), sizeof(rows));
  auto n = static_cast<int64_t>(rows);
  if (block->size() != sizeof(rows) + rows * (784 * 4 + 4))
    throw data_error("the node-shared block " + block->name() +
                       " does not hold Fashion-MNIST: remove it from /dev/shm",
                     errc::bad_file);
  dataset out;
  const char* x = block->data() + sizeof(rows);
  out.features = tensor::view({n, 784}, dtype::float32, x, block);
  out.labels = tensor::view({n}, dtype::int32, x + rows * 784 * 4, block);
  return out;
}

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names{
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

} // namespace lumen::ml
