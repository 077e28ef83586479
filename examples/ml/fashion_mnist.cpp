// fashion_mnist: one process learns Fashion-MNIST's ten classes of
// clothing with a small MLP and plain SGD, the loop every distributed
// trainer in Lumen splits up: take a batch, compute the loss and its
// gradient, step the weights.
//
// Run:   ./.build/examples/ml/fashion_mnist [--epochs=N]
// Needs Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist).
// Prints each epoch's loss, test accuracy and examples per second, and
// "fashion_mnist: all steps ok" once the test accuracy passes 0.85.

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <lumen/ml.hpp>

namespace ml = lumen::ml;

int main(int argc, char** argv) {
  int epochs = 3;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--epochs=", 0) == 0 && std::stoi(arg.substr(9)) > 0) {
      epochs = std::stoi(arg.substr(9));
    } else {
      std::cerr << "fashion_mnist: unknown flag " << arg
                << "; the one flag is --epochs=N (N > 0)\n";
      return 2;
    }
  }
  try {
    // [train]
    auto train = ml::load_fashion_mnist(ml::split::train);
    auto test = ml::load_fashion_mnist(ml::split::test);
    // Pixels around zero with unit spread: SGD converges faster.
    ml::standardize(train, 0.2860f, 0.3530f);
    ml::standardize(test, 0.2860f, 0.3530f);
    ml::mlp model{784, {128}, 10};
    auto weights = model.init(/*seed=*/1);
    std::vector<float> grad(model.num_params());
    const size_t batch = 64;
    const float lr = 0.05f;
    for (int epoch = 0; epoch < epochs; ++epoch) {
      auto start = std::chrono::steady_clock::now();
      auto order = ml::shuffled_rows(train.size(), /*seed=*/epoch);
      double loss = 0;
      size_t steps = 0;
      for (size_t at = 0; at + batch <= order.size(); at += batch, ++steps) {
        auto b = train.take({order.begin() + at, order.begin() + at + batch});
        loss += model.loss_and_gradient(weights.data(), b, grad.data());
        for (size_t i = 0; i < weights.size(); ++i)
          weights[i] -= lr * grad[i];
      }
      std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
      std::printf("epoch %d: loss %.4f, test accuracy %.4f, %.0f examples/s\n",
                  epoch + 1, loss / steps, model.accuracy(weights.data(), test),
                  steps * batch / took.count());
    }
    // [/train]
    bool ok = model.accuracy(weights.data(), test) > 0.85f;
    std::cout << (ok ? "fashion_mnist: all steps ok"
                     : "fashion_mnist: accuracy below 0.85")
              << "\n";
    return ok ? 0 : 1;
  } catch (const lumen::error& e) {
    std::cerr << "fashion_mnist: " << e.what() << "\n";
    return 1;
  }
}
