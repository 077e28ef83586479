// Cancelling work, as ray.cancel.
//
// Teaches: `lumen::cancel(ref)`, which fails the ref at once with
// lumen::task_cancelled; and how long work notices it with
// `lumen::cancelled()` and returns early, so that it stops using its CPU.
//
// Run:   ./.build/examples/basics/cancel
// Prints "cancel: task count_up_to was cancelled by lumen::cancel" and
// "cancel: all steps ok".

#include <chrono>
#include <iostream>
#include <thread>

#include <lumen/lumen.hpp>

// [cancellable]
// Long work that stops early once lumen::cancel is called for its ref.
int count_up_to(int limit) {
  int n = 0;
  while (n < limit && !lumen::cancelled()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ++n;
  }
  return n;
}
LUMEN_REMOTE(count_up_to);
// [/cancellable]

int main(int argc, char** argv) {
  lumen::init(argc, argv);
  // [cancel]
  auto slow = lumen::task(count_up_to).remote(1000000); // 17 minutes
  lumen::cancel(slow); // like ray.cancel: the ref fails at once
  try {
    lumen::get(slow);
  } catch (const lumen::task_cancelled& e) {
    std::cout << "cancel: " << e.what() << "\n";
  }
  // [/cancel]
  lumen::shutdown();
  std::cout << "cancel: all steps ok\n";
}
