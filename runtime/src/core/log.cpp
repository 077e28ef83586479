#include "core/log.hpp"

#include <atomic>
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

namespace {

std::atomic<bool> lifecycle_quiet{false};

} // namespace

void log_lifecycle(const std::string& text) {
  if (!lifecycle_quiet)
    log_line(text);
}

void set_lifecycle_quiet(bool quiet) {
  lifecycle_quiet = quiet;
}

void log_budget::say(const std::string& line) {
  auto now = std::chrono::steady_clock::now();
  if (now - window_ >= std::chrono::seconds(1)) {
    if (quiet_ > 0)
      log_line("... and " + std::to_string(quiet_) +
               " more such lines in the second before");
    window_ = now;
    said_ = 0;
    quiet_ = 0;
  }
  if (said_ < 5) {
    ++said_;
    log_line(line);
  } else {
    ++quiet_;
  }
}

} // namespace lumen::detail
