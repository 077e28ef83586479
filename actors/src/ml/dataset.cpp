#include "lumen/ml/data.hpp"
#include "lumen/ml/random.hpp"

#include <cmath>
#include <cstring>
#include <random>

// The data set's plain parts (rows, shards, a synthetic problem), apart
// from the file readers so that the browser playground builds them too.

namespace lumen::ml {

dataset dataset::take(const std::vector<size_t>& rows) const {
  auto d = dim();
  dataset out;
  out.features =
    tensor({static_cast<int64_t>(rows.size()), static_cast<int64_t>(d)});
  out.labels = tensor({static_cast<int64_t>(rows.size())}, labels.type());
  auto elem = size_of(labels.type());
  auto from = features.data<float>();
  auto to = out.features.data<float>();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] >= size())
      throw usage_error("dataset::take: row " + std::to_string(rows[i]) +
                        " of a data set of " + std::to_string(size()));
    std::memcpy(to + i * d, from + rows[i] * d, d * sizeof(float));
    std::memcpy(out.labels.raw() + i * elem, labels.raw() + rows[i] * elem,
                elem);
  }
  return out;
}

dataset share_of(const dataset& d, size_t worker, size_t workers) {
  if (worker >= workers)
    throw usage_error("share_of: worker " + std::to_string(worker) + " of " +
                      std::to_string(workers) +
                      "; workers are numbered from 0");
  size_t n = d.size();
  size_t begin = n * worker / workers, end = n * (worker + 1) / workers;
  return {d.features.rows(begin, end), d.labels.rows(begin, end)};
}

void standardize(dataset& d, float mean, float stddev) {
  if (!(stddev > 0))
    throw usage_error("standardize: a standard deviation of " +
                      std::to_string(stddev) + "; give a positive one");
  auto x = d.features.vec<float>();
  x = (x.array() - mean) / stddev;
}

uint64_t derive_seed(uint64_t run_seed, uint64_t stream) noexcept {
  auto z = run_seed + (stream + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<size_t> shuffled_rows(size_t n, uint64_t seed) {
  std::vector<size_t> rows(n);
  for (size_t i = 0; i < n; ++i)
    rows[i] = i;
  std::mt19937_64 gen{seed};
  // std::shuffle and the distributions differ between standard libraries;
  // this draw is the same everywhere.
  for (size_t i = n; i > 1; --i) {
    auto j = static_cast<size_t>(gen() % i);
    std::swap(rows[i - 1], rows[j]);
  }
  return rows;
}

std::vector<size_t> shard_rows(const std::vector<size_t>& rows, size_t worker,
                               size_t workers) {
  if (worker >= workers)
    throw usage_error("shard_rows: worker " + std::to_string(worker) + " of " +
                      std::to_string(workers) +
                      "; workers are numbered 0 to workers-1");
  auto begin = rows.size() * worker / workers;
  auto end = rows.size() * (worker + 1) / workers;
  return {rows.begin() + static_cast<std::ptrdiff_t>(begin),
          rows.begin() + static_cast<std::ptrdiff_t>(end)};
}

dataset shard_of(const dataset& d, size_t worker, size_t workers,
                 uint64_t seed) {
  return d.take(shard_rows(shuffled_rows(d.size(), seed), worker, workers));
}

float standard_normal(std::mt19937_64& gen) {
  auto uniform = [&] {
    return (static_cast<double>(gen() >> 11) + 0.5) / 9007199254740992.0;
  };
  double u1 = uniform();
  double u2 = uniform();
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                            std::cos(6.283185307179586 * u2));
}

linear_problem make_linear_regression(size_t n, size_t dim, uint64_t seed,
                                      float noise) {
  std::mt19937_64 gen{seed};
  auto normal = [&] { return standard_normal(gen); };
  linear_problem p;
  p.weights.resize(dim);
  for (auto& w : p.weights)
    w = normal();
  p.bias = normal();
  p.data.features =
    tensor({static_cast<int64_t>(n), static_cast<int64_t>(dim)});
  p.data.labels = tensor({static_cast<int64_t>(n)});
  auto x = p.data.features.data<float>();
  auto y = p.data.labels.data<float>();
  for (size_t i = 0; i < n; ++i) {
    float acc = p.bias;
    for (size_t j = 0; j < dim; ++j) {
      x[i * dim + j] = normal();
      acc += x[i * dim + j] * p.weights[j];
    }
    y[i] = acc + noise * normal();
  }
  return p;
}

} // namespace lumen::ml
