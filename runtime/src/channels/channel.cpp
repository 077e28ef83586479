#include "lumen/channel.hpp"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "channels/channel_hub.hpp"
#include "core/process_runtime.hpp"
#include "transport/socket_io.hpp"

namespace lumen {

namespace {

using clock = std::chrono::steady_clock;

std::chrono::milliseconds left_until(clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - clock::now()));
}

} // namespace

channel::channel(int fd, std::string name) noexcept
  : fd_(fd)
  , name_(std::move(name)) {}

channel::~channel() {
  if (fd_ >= 0)
    ::close(fd_);
}

channel::channel(channel&& other) noexcept
  : fd_(std::exchange(other.fd_, -1))
  , name_(std::move(other.name_)) {}

channel& channel::operator=(channel&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    name_ = std::move(other.name_);
  }
  return *this;
}

void channel::fail(const char* doing) const {
  if (fd_ < 0)
    throw usage_error(std::string{"cannot "} + doing +
                      " on an empty channel; make one with lumen::connect or "
                      "channel_listener::accept");
  if (errno == EAGAIN || errno == EWOULDBLOCK)
    throw channel_error("channel '" + name_ + "': the peer did not " +
                          (std::strcmp(doing, "send") == 0 ? "take" : "send") +
                          " anything within the channel's timeout",
                        errc::timeout);
  throw channel_error("channel '" + name_ +
                        "': the peer closed it, or its process is gone",
                      errc::channel_closed);
}

void channel::send(const void* data, size_t n) {
  errno = 0;
  if (fd_ < 0 || !detail::write_all(fd_, data, n))
    fail("send");
}

void channel::send(iovec* parts, int count) {
  errno = 0;
  if (fd_ < 0 || !detail::write_all(fd_, parts, count))
    fail("send");
}

size_t channel::send_some(const iovec* parts, int count) {
  for (;;) {
    errno = 0;
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(parts);
    msg.msg_iovlen = static_cast<size_t>(count);
    auto k = fd_ < 0 ? -1 : ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    if (k < 0)
      fail("send");
    return static_cast<size_t>(k);
  }
}

void channel::recv(void* data, size_t n) {
  errno = 0;
  if (fd_ < 0 || !detail::read_all(fd_, data, n))
    fail("receive");
}

size_t channel::recv_some(void* data, size_t n) {
  errno = 0;
  auto k = fd_ < 0 ? -1 : detail::recv_in_time(fd_, data, n);
  if (k <= 0)
    fail("receive");
  return static_cast<size_t>(k);
}

void channel::set_timeout(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0)
    throw usage_error("channel '" + name_ + "': a timeout of " +
                      std::to_string(timeout.count()) +
                      " ms; give 0 (wait forever) or a positive one");
  if (fd_ < 0)
    return;
  detail::set_socket_timeout(fd_, timeout, true);
}

void channel::shutdown_send() noexcept {
  if (fd_ >= 0)
    ::shutdown(fd_, SHUT_WR);
}

void channel::shutdown() noexcept {
  if (fd_ >= 0)
    ::shutdown(fd_, SHUT_RDWR);
}

channel_listener::channel_listener(std::string name,
                                   std::shared_ptr<queue> q) noexcept
  : name_(std::move(name))
  , queue_(std::move(q)) {}

channel_listener::~channel_listener() {
  release();
}

channel_listener&
channel_listener::operator=(channel_listener&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    queue_ = std::move(other.queue_);
  }
  return *this;
}

void channel_listener::release() noexcept {
  if (!queue_)
    return;
  queue_.reset();
  try {
    detail::this_runtime().close_channel_name(name_);
  } catch (...) {
    // The runtime is gone, and with it the name.
  }
}

channel channel_listener::accept(std::chrono::milliseconds timeout) {
  if (!queue_)
    throw usage_error("accept on an empty channel_listener; make one with "
                      "lumen::listen");
  std::unique_lock<std::mutex> lock{queue_->mtx};
  if (!queue_->cv.wait_for(
        lock, timeout, [&] { return !queue_->fds.empty() || queue_->closed; }))
    throw channel_error("channel '" + name_ + "': nobody connected within " +
                          std::to_string(timeout.count()) + " ms",
                        errc::timeout);
  if (queue_->fds.empty())
    throw channel_error("channel '" + name_ +
                          "': the runtime shut down while waiting",
                        errc::channel_closed);
  int fd = queue_->fds.front();
  queue_->fds.pop_front();
  return channel{fd, name_};
}

channel_listener listen(const std::string& name) {
  detail::check_channel_name(name);
  return {name, detail::this_runtime().open_channel_name(name)};
}

channel connect(const std::string& name, std::chrono::milliseconds timeout) {
  detail::check_channel_name(name);
  auto& rt = detail::this_runtime();
  auto deadline = clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    // A name can be in the directory a moment before its listener is up,
    // or after it is gone: try until the deadline.
    if (auto where = rt.find_endpoint(name)) {
      try {
        return detail::open_channel(*where, name, rt.link_credentials(),
                                    left_until(deadline));
      } catch (const error& e) {
        // Refused, or nobody there: the directory may still name a
        // listener that is gone, or a process that died, for a moment.
        // A wrong token or TLS setting is for the caller.
        if (e.code() != errc::unreachable || clock::now() >= deadline)
          throw;
      }
    }
    if (clock::now() + pause >= deadline)
      throw channel_error("nobody listens under the channel name '" + name +
                            "' (waited " + std::to_string(timeout.count()) +
                            " ms); is the listening process up, and in this "
                            "cluster?",
                          errc::unreachable);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

} // namespace lumen
