#pragma once

// A TCP relay on loopback in front of a port, holding what the port sends
// back for a while before passing it on: a peer on a loaded machine, slow
// to answer but losing nothing.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace lumen::test {

class slow_relay {
public:
  /// Relays connections to 127.0.0.1:`target`, holding each chunk the
  /// target sends for `delay`.
  slow_relay(uint16_t target, std::chrono::milliseconds delay)
    : target_(target)
    , delay_(delay) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = loopback(0);
    socklen_t len = sizeof(addr);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listener_, 16) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("slow_relay: cannot listen on loopback");
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  slow_relay(const slow_relay&) = delete;
  slow_relay& operator=(const slow_relay&) = delete;

  ~slow_relay() {
    stop_ = true;
    acceptor_.join(); // no pumps start after this
    for (int fd : fds_)
      ::shutdown(fd, SHUT_RDWR); // wakes the pumps blocked in recv
    for (auto& t : pumps_)
      t.join();
    for (int fd : fds_)
      ::close(fd);
    ::close(listener_);
  }

  std::string address() const {
    return "127.0.0.1:" + std::to_string(port_);
  }

private:
  static sockaddr_in loopback(uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    return addr;
  }

  void accept_loop() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) != 1)
        continue;
      int client = ::accept(listener_, nullptr, nullptr);
      int server = ::socket(AF_INET, SOCK_STREAM, 0);
      auto addr = loopback(target_);
      if (client < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&addr),
                                  sizeof(addr)) != 0) {
        ::close(client);
        ::close(server);
        continue;
      }
      fds_.push_back(client);
      fds_.push_back(server);
      pumps_.emplace_back([this, client, server] { pump(client, server, {}); });
      pumps_.emplace_back(
        [this, client, server] { pump(server, client, delay_); });
    }
  }

  void pump(int from, int to, std::chrono::milliseconds hold) {
    std::vector<char> buf(1 << 16);
    for (;;) {
      auto n = ::recv(from, buf.data(), buf.size(), 0);
      if (n <= 0 || stop_)
        break;
      std::this_thread::sleep_for(hold);
      if (::send(to, buf.data(), static_cast<size_t>(n), MSG_NOSIGNAL) != n)
        break;
    }
    ::shutdown(to, SHUT_WR);
  }

  uint16_t target_;
  std::chrono::milliseconds delay_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<int> fds_;
  std::vector<std::thread> pumps_;
};

} // namespace lumen::test
