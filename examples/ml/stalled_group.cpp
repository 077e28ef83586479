// stalled_group: what a hung collective tells you. Three members average a
// gradient step after step; before the fourth, rank 2 is stuck in its own
// compute (a sleep here; a slow data loader or a deadlock in real code).
// The others wait in their all-reduce until the group's timeout, then fail
// naming rank 2, where it last called a collective, how far behind it is,
// and the file with every member's last operations (the flight recorder).
//   ./.build/examples/ml/stalled_group
// Prints each member's error and "stalled_group: all steps ok".

#include <chrono>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <lumen/lumen.hpp>
#include <lumen/ml.hpp>

namespace coll = lumen::collective;

int main() {
  lumen::init();
  auto folder = std::filesystem::temp_directory_path() / "lumen-stalled-group";
  coll::set_flight_records_dir(folder.string());
  std::mutex print;
  std::vector<std::string> errors(3);
  // [stall]
  auto member = [&](int rank) {
    coll::set_timeout("grads", std::chrono::milliseconds(500));
    coll::init_group(3, rank, "grads");
    std::vector<float> grad(1000, 1.0f);
    try {
      for (int step = 1; step <= 4; ++step) {
        if (rank == 2 && step == 4) // stuck in its own compute
          std::this_thread::sleep_for(std::chrono::seconds(2));
        coll::allreduce(grad, "grads", coll::reduce_op::average);
      }
    } catch (const coll::collective_error& e) {
      std::lock_guard<std::mutex> guard{print};
      std::cout << "rank " << rank << ": " << e.what() << "\n\n";
      errors[static_cast<size_t>(rank)] = e.what();
    }
    coll::destroy_group("grads");
  };
  // [/stall]
  std::vector<std::thread> members;
  for (int rank = 0; rank < 3; ++rank)
    members.emplace_back(member, rank);
  for (auto& m : members)
    m.join();
  lumen::shutdown();
  bool named =
    errors[0].find("rank 2 is behind by 1 operation") != std::string::npos;
  std::cout << (named ? "stalled_group: all steps ok"
                      : "stalled_group: FAIL, rank 2 was not named")
            << std::endl;
  return named ? 0 : 1;
}
