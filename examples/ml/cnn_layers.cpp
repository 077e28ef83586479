// cnn_layers: a convolutional network written as a spec string, built by
// lumen::nn::sequential over one flat parameter vector, trained in one
// process on Fashion-MNIST's first rows: the model the data-parallel
// trainer, the parameter server and the checkpoints take as they take
// the MLP.
//
// Run:   ./.build/examples/ml/cnn_layers [--rows=N] [--epochs=N]
//                                        [--model=SPEC]
// Needs Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist).
// Prints the layers, each epoch's loss, test accuracy and examples per
// second, and "cnn_layers: all steps ok" once the test accuracy passes
// 0.70 (two epochs of all 60,000 rows reach 0.86).

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <lumen/ml.hpp>
#include <lumen/nn/sequential.hpp>

namespace ml = lumen::ml;

int main(int argc, char** argv) {
  size_t rows = 4000;
  int epochs = 2;
  std::string spec = "conv(8,3)-relu-pool(2)-conv(16,3)-relu-pool(2)-"
                     "linear(64)-relu-linear(10)";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--rows=", 0) == 0 && std::stol(arg.substr(7)) > 0) {
      rows = std::stoul(arg.substr(7));
    } else if (arg.rfind("--epochs=", 0) == 0 && std::stoi(arg.substr(9)) > 0) {
      epochs = std::stoi(arg.substr(9));
    } else if (arg.rfind("--model=", 0) == 0) {
      spec = arg.substr(8);
    } else {
      std::cerr << "cnn_layers: unknown flag " << arg
                << "; the flags are --rows=N, --epochs=N (N > 0) and "
                   "--model=SPEC\n";
      return 2;
    }
  }
  try {
    // [cnn]
    auto all = ml::load_fashion_mnist(ml::split::train);
    auto test = ml::load_fashion_mnist(ml::split::test);
    ml::standardize(all, 0.2860f, 0.3530f);
    ml::standardize(test, 0.2860f, 0.3530f);
    // Images are 1 channel of 28x28; the last layer gives the 10 logits.
    lumen::nn::sequential model{{1, 28, 28}, spec};
    std::cout << model.summary();
    auto weights = model.init(/*seed=*/1);
    std::vector<float> grad(model.num_params());
    ml::optimizer sgd{{ml::optimizer_kind::momentum, 0.01f}, weights.size()};
    const size_t batch = 32;
    for (int epoch = 0; epoch < epochs; ++epoch) {
      auto start = std::chrono::steady_clock::now();
      auto order = ml::shuffled_rows(std::min(rows, all.size()), epoch);
      double loss = 0;
      size_t steps = 0;
      for (size_t at = 0; at + batch <= order.size(); at += batch, ++steps) {
        auto b = all.take({order.begin() + at, order.begin() + at + batch});
        loss += model.loss_and_gradient(weights.data(), b, grad.data());
        sgd.step(weights.data(), grad.data(), grad.size());
      }
      std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
      std::printf("epoch %d: loss %.4f, test accuracy %.4f, %.0f examples/s\n",
                  epoch + 1, loss / double(steps),
                  model.accuracy(weights.data(), test),
                  double(steps * batch) / took.count());
    }
    // [/cnn]
    bool ok = model.accuracy(weights.data(), test) > 0.70f;
    std::cout << (ok ? "cnn_layers: all steps ok"
                     : "cnn_layers: accuracy below 0.70")
              << "\n";
    return ok ? 0 : 1;
  } catch (const lumen::error& e) {
    std::cerr << "cnn_layers: " << e.what() << "\n";
    return 1;
  }
}
