#include "data_plane.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include "socket_io.hpp"

namespace lumen::detail {

data_connection::data_connection(int fd)
  : fd_(fd) {}

data_connection::~data_connection() {
  ::close(fd_);
}

bool data_connection::send(frame_kind kind, reply_status status, uint64_t id,
                           std::vector<byte_span> parts) {
  frame_header h{frame_magic,
                 static_cast<uint8_t>(kind),
                 static_cast<uint8_t>(status),
                 0,
                 id,
                 0};
  std::vector<iovec> iov;
  iov.push_back({&h, sizeof(h)});
  for (auto& p : parts) {
    h.length += p.size;
    if (p.size > 0)
      iov.push_back({const_cast<char*>(p.data), p.size});
  }
  std::lock_guard<std::mutex> guard{write_mtx_};
  return write_all(fd_, iov.data(), static_cast<int>(iov.size()));
}

bool data_connection::receive(frame_header& h, std::shared_ptr<bytes>& payload,
                              uint64_t max_length) {
  if (!read_all(fd_, &h, sizeof(h)) || h.magic != frame_magic ||
      h.length > max_length)
    return false;
  payload = std::make_shared<bytes>(h.length);
  return read_all(fd_, payload->data(), h.length);
}

void data_connection::close() {
  ::shutdown(fd_, SHUT_RDWR);
}

} // namespace lumen::detail
