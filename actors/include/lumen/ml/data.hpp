#pragma once

// Data for the models: Fashion-MNIST from the IDX files Debian ships
// (dataset-fashion-mnist), a synthetic linear regression with known
// weights, and the row orders of training: a seeded shuffle per epoch and
// a disjoint share of it per worker.
//
//   auto train = lumen::ml::load_fashion_mnist(lumen::ml::split::train);
//   auto rows = lumen::ml::shard_rows(lumen::ml::shuffled_rows(train.size(),
//                                                              seed + epoch),
//                                     worker, workers);
//   auto batch = train.take({rows.begin(), rows.begin() + 64});
//
// No CAF here: tests, exercises and the browser playground use it alike.

#include <cstdint>
#include <string>
#include <vector>

#include <lumen/errors.hpp>

#include "lumen/ml/tensor.hpp"

namespace lumen::ml {

/// A file that cannot be used: a data set, a checkpoint, a model. The
/// message names the file and the fix; `code()` is `errc::missing_file`
/// (not there), `errc::bad_file` (malformed, damaged, of another format,
/// holding NaN) or `errc::write_failed` (a full disk, no permission).
class data_error : public error {
public:
  data_error(const std::string& what, errc code)
    : error(what, code) {}
};

/// Rows of examples in memory: `features` is float32 [n, dim], row-major;
/// `labels` is int32 [n] (class indices) or float32 [n] (regression
/// targets). Copies share storage, as tensors do.
struct dataset {
  tensor features{{0, 0}};
  tensor labels{{0}, dtype::int32};

  size_t size() const noexcept {
    return static_cast<size_t>(features.shape()[0]);
  }
  size_t dim() const noexcept {
    return static_cast<size_t>(features.shape()[1]);
  }

  /// The rows `rows` (indices into this set), copied in that order: a
  /// batch. Throws `usage_error` for an index out of range.
  dataset take(const std::vector<size_t>& rows) const;
};

/// An IDX file (Yann LeCun's format, gzip-compressed or not): its
/// dimensions and its unsigned bytes, of its first `rows` entries along the
/// first dimension (all by default; dims[0] says how many were kept). The
/// rest is still read and checked, not kept. Throws `data_error` naming the
/// file if it is missing, is not an IDX file of unsigned bytes, or is
/// shorter than its dimensions say.
struct idx_file {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> bytes;
};
idx_file read_idx(const std::string& path, size_t rows = SIZE_MAX);

enum class split { train, test };

/// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* fashion_mnist_dir =
  "/usr/share/datasets/fashion-mnist";

/// Fashion-MNIST's 60,000 training or 10,000 test images (28×28 as 784
/// features, scaled to [0, 1]) and their labels (0-9), from the IDX files
/// in `dir`. Throws `data_error` naming the file and the fix (the package
/// to install, or the damage found).
dataset load_fashion_mnist(split which,
                           const std::string& dir = fashion_mnist_dir);

/// The split's first `rows` examples, as `load_fashion_mnist` gives them,
/// without the memory of the others: a quick experiment on 8,000 images
/// holds 25 MB, not 188. Throws `usage_error` for 0 rows or more than the
/// split has, and as `load_fashion_mnist` does.
dataset load_fashion_mnist(split which, size_t rows,
                           const std::string& dir = fashion_mnist_dir);

/// Fashion-MNIST as `load_fashion_mnist` gives it, then standardized with
/// `mean` and `stddev` (0 and 1: as loaded), held once per machine in a
/// node-shared block (lumen/node_shared.hpp) that every process asking for
/// the same split, scaling and files maps: the tensors view it, read-only
/// in place (a write makes a private copy). Throws as `load_fashion_mnist`
/// does, and `error` if shared memory fails.
dataset node_fashion_mnist(split which, float mean = 0, float stddev = 1,
                           const std::string& dir = fashion_mnist_dir);

/// Worker `worker`'s share of `d` in place: a contiguous range of its rows
/// (sizes differing by one at most), viewing `d`'s numbers. The shares of
/// workers 0 to workers-1 are disjoint and cover `d`. Throws `usage_error`
/// unless worker < workers.
dataset share_of(const dataset& d, size_t worker, size_t workers);

/// Fashion-MNIST's class names, by label.
const std::vector<std::string>& fashion_mnist_classes();

/// Shifts and scales every feature: x = (x - mean) / stddev (Fashion-
/// MNIST's pixels have mean 0.2860 and deviation 0.3530 over the training
/// set). Throws `usage_error` unless stddev is positive.
void standardize(dataset& d, float mean, float stddev);

/// The seed of stream `stream` (a worker's batch order, a model's
/// initial weights, ...) drawn from one run seed, so that one number
/// reproduces a whole run and no two streams share a seed (splitmix64's
/// mix of the two).
uint64_t derive_seed(uint64_t run_seed, uint64_t stream) noexcept;

/// 0 to n-1 in an order drawn from `seed` (the same on every platform:
/// a Fisher-Yates shuffle over std::mt19937_64).
std::vector<size_t> shuffled_rows(size_t n, uint64_t seed);

/// Worker `worker`'s share of `rows`: a contiguous part, sizes differing
/// by one at most; the shares of workers 0 to workers-1 are disjoint and
/// cover `rows`. Throws `usage_error` unless worker < workers.
std::vector<size_t> shard_rows(const std::vector<size_t>& rows, size_t worker,
                               size_t workers);

/// Worker `worker`'s shard of `d` for data-parallel training: its share
/// (shard_rows) of the rows shuffled with `seed`, copied. The shards of
/// workers 0 to workers-1 are disjoint and cover `d`.
dataset shard_of(const dataset& d, size_t worker, size_t workers,
                 uint64_t seed);

/// A linear regression whose answer is known: y = x·weights + bias +
/// noise, x and the weights drawn from N(0, 1) with `seed`, the noise
/// from N(0, noise²).
struct linear_problem {
  dataset data; // labels are the float32 targets
  std::vector<float> weights;
  float bias = 0;
};
linear_problem make_linear_regression(size_t n, size_t dim, uint64_t seed,
                                      float noise = 0.01f);

} // namespace lumen::ml
