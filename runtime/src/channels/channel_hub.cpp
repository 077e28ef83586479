#include "channels/channel_hub.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include "lumen/errors.hpp"

#include "core/log.hpp"
#include "security/gate_wire.hpp"
#include "transport/socket_io.hpp"

namespace lumen {

channel_listener::queue::~queue() {
  for (int fd : fds)
    ::close(fd);
}

} // namespace lumen

namespace lumen::detail {

void check_channel_name(const std::string& name) {
  if (name.empty() || name.size() > max_channel_name)
    throw usage_error("a channel name has 1 to " +
                      std::to_string(max_channel_name) + " bytes, not " +
                      std::to_string(name.size()));
}

channel_hub::channel_hub(const std::string& host, credentials creds)
  : host_(host)
  , gate_(std::make_unique<gate>(host, 0, std::move(creds), "channel")) {
  gate_->open([this](gated_socket link, const std::string&) {
    // A channel's reads and writes take a socket: a TLS link's plaintext
    // comes through a relay.
    int fd = as_plain_socket(std::move(link), gate_->creds().tls.get());
    if (fd >= 0)
      admit(fd);
  });
}

channel_hub::~channel_hub() {
  gate_.reset();
  std::vector<std::thread> greeters;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    greeters = greeters_.take();
  }
  join_all(greeters);
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& [name, q] : queues_) {
    std::lock_guard<std::mutex> qguard{q->mtx};
    q->closed = true;
    q->cv.notify_all();
  }
}

std::string channel_hub::address() const {
  return host_ + ":" + std::to_string(gate_->port());
}

std::shared_ptr<channel_listener::queue>
channel_hub::open(const std::string& name) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& q = queues_[name];
  if (q)
    throw usage_error("a listener in this process has the channel name '" +
                        name + "' already; destroy it first or pick another",
                      errc::name_taken);
  q = std::make_shared<channel_listener::queue>();
  return q;
}

bool channel_hub::listening(const std::string& name) {
  std::lock_guard<std::mutex> guard{mtx_};
  return queues_.count(name) > 0;
}

void channel_hub::close(const std::string& name) {
  std::shared_ptr<channel_listener::queue> q;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = queues_.find(name);
    if (i == queues_.end())
      return;
    q = std::move(i->second);
    queues_.erase(i);
  }
  std::lock_guard<std::mutex> guard{q->mtx};
  q->closed = true;
  for (int fd : q->fds)
    ::close(fd);
  q->fds.clear();
  q->cv.notify_all();
}

void channel_hub::admit(int fd) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (stopping_) {
    ::close(fd);
    return;
  }
  greeters_.start([this, fd] {
    // Admitted peers have the token; the deadline only keeps a stuck one
    // from holding its thread.
    set_socket_timeout(fd, std::chrono::milliseconds(2000), false);
    char len[2];
    std::string name;
    bool named = read_all(fd, len, 2);
    if (named) {
      auto n = get_u16(len);
      named = n > 0 && n <= max_channel_name;
      if (named) {
        name.resize(n);
        named = read_all(fd, name.data(), n);
      }
    }
    set_socket_timeout(fd, std::chrono::milliseconds(0), false);
    keep_probing(fd);
    std::shared_ptr<channel_listener::queue> q;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (named) {
        auto i = queues_.find(name);
        if (i != queues_.end())
          q = i->second;
      }
    }
    bool queued = false;
    if (q) {
      std::lock_guard<std::mutex> qguard{q->mtx};
      auto verdict = static_cast<char>(channel_taken);
      if (!q->closed && write_all(fd, &verdict, 1)) {
        q->fds.push_back(fd);
        q->cv.notify_one();
        queued = true;
      }
    } else if (named) {
      auto verdict = static_cast<char>(channel_unknown);
      write_all(fd, &verdict, 1);
    }
    if (!queued)
      ::close(fd);
    std::lock_guard<std::mutex> guard{mtx_};
    greeters_.done();
  });
}

channel open_channel(const std::string& where, const std::string& name,
                     const credentials& creds,
                     std::chrono::milliseconds timeout) {
  int fd = as_plain_socket(
    pass_gate(parse_address(where), creds, "channel '" + name + "'", timeout),
    creds.tls.get());
  if (fd < 0)
    throw channel_error("cannot open the channel '" + name + "' at " + where +
                          ": could not relay its TLS link (out of "
                          "descriptors or memory)",
                        errc::unreachable);
  char len[2];
  put_u16(len, name.size());
  char verdict = static_cast<char>(channel_unknown);
  set_socket_timeout(fd, std::max(timeout, std::chrono::milliseconds(1)),
                     false);
  bool answered = write_all(fd, len, 2) &&
                  write_all(fd, name.data(), name.size()) &&
                  read_all(fd, &verdict, 1);
  set_socket_timeout(fd, std::chrono::milliseconds(0), false);
  if (!answered || verdict != static_cast<char>(channel_taken)) {
    ::close(fd);
    throw channel_error("nobody listens under the channel name '" + name +
                          "' at " + where + " (any more)",
                        errc::unreachable);
  }
  set_no_delay(fd);
  keep_probing(fd);
  return channel{fd, name};
}

} // namespace lumen::detail
