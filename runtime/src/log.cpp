#include "log.hpp"

#include <chrono>
#include <ctime>
#include <iostream>
#include <mutex>

namespace lumen::detail {

void log_line(const std::string& text) {
  static std::mutex mtx;
  auto now =
    std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char stamp[32];
  tm local{};
  ::localtime_r(&now, &local);
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &local);
  std::lock_guard<std::mutex> guard{mtx};
  std::cerr << stamp << " lumen: " << text << std::endl;
}

} // namespace lumen::detail
