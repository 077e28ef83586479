#pragma once

// `lumen train fashion-mnist`: an MLP trained data-parallel on Debian's
// Fashion-MNIST by the trainer (trainer.hpp), on the local node processes
// of an embedded cluster or on a cluster's nodes, with a progress bar,
// the metrics as CSV, a plot, and safetensors checkpoints that numpy or
// PyTorch read from the file alone (model_file.hpp). The train loop is
// registered as `fashion_mnist_loop`, so every node of a cluster started
// with the `lumen` command can run it.
//
//   int main(int argc, char** argv) {
//     return lumen::cli_main(argc, argv, {lumen::train::train_verb()});
//   }

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <lumen/cli.hpp>

#include "lumen/ml/models.hpp"
#include "lumen/train/trainer.hpp"

namespace lumen::train {

/// The Fashion-MNIST loop's registered name. Its settings: "epochs" (the
/// run's total), "lr" (momentum SGD, cosine decay to 0), "weight_decay",
/// "batch" (per worker), "seed", "model" ("mlp", "cnn" or a layer spec:
/// fashion_mnist_model), "hidden" (the MLP's widths, "256,128"), "limit"
/// (training rows, 0: all), "test_limit", "data" (the data set's folder),
/// "overlap" (0: each all-reduce after the backward pass, to measure what
/// overlap hides). Rank 0 reports each epoch's metrics and a checkpoint folder
/// holding model.safetensors.
inline constexpr const char* fashion_mnist_loop = "lumen.train.fashion_mnist";

/// The loop's settings where a run gives none, and `lumen train`'s
/// defaults: 32 rows a step on each of 2 workers is PyTorch's batch of 64,
/// which reaches 0.90 test accuracy in 20 epochs (with 128 rows a step the
/// run stops near 0.898, whatever the learning rate).
struct fashion_mnist_defaults {
  static constexpr size_t epochs = 20;
  static constexpr double lr = 0.03;
  static constexpr double weight_decay = 5e-4;
  static constexpr size_t batch = 32;
};

/// The checkpoint's file (ml::model_file): the model, "optimizer.velocity",
/// and in its metadata the normalisation, the classes and "epochs_done".
inline constexpr const char* model_file_name = "model.safetensors";

/// The standardization the loop applies to pixels scaled to [0, 1]: the
/// training set's mean and standard deviation.
inline constexpr float fashion_mnist_mean = 0.2860f;
inline constexpr float fashion_mnist_std = 0.3530f;

/// The `lumen train` verb, for cli_main.
cli_verb train_verb();

/// `--model cnn`: two padded convolutions, as in Fashion-MNIST's own
/// benchmark table, with dropout before and after the hidden layer
/// (without it the run stops near 0.915, overfitting; with it, 0.928
/// after 20 epochs on 2 workers).
inline constexpr const char* fashion_mnist_cnn =
  "conv(32,3,1)-relu-pool(2)-conv(64,3,1)-relu-pool(2)-dropout(25)-"
  "linear(128)-relu-dropout(25)-linear(10)";

/// The model `model` names for 28x28 images of 10 classes: "mlp" (an MLP
/// of `hidden`'s widths), "cnn" (fashion_mnist_cnn) or a layer spec
/// (nn::sequential's) over 1x28x28. Throws `usage_error` naming what
/// does not parse or fit.
ml::model_spec fashion_mnist_model(const std::string& model,
                                   const std::string& hidden);

/// Throws `usage_error` if a checkpoint of model `theirs` cannot go on as
/// a run of `ours`, naming both.
void check_same_model(const ml::model_spec& theirs, const ml::model_spec& ours);

namespace detail {

/// "256,128" as widths; throws `usage_error` naming the text otherwise.
std::vector<uint64_t> hidden_widths(const std::string& text);

/// Registers the loop; the inline variable below calls it from every
/// program that includes this header, though the library is static.
bool fashion_mnist_registered();
inline const bool fashion_mnist_linked = fashion_mnist_registered();

} // namespace detail

} // namespace lumen::train
