#include "data_plane.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <vector>

#include "socket_io.hpp"

namespace lumen::detail {

namespace {

/// Buffers of large payloads, kept for the next frames of their size: a
/// fresh one would be zero-filled and faulted in page by page (a 40 MB
/// push: some 10 ms each way), where a kept one is hot and sized.
class payload_pool {
public:
  static constexpr size_t smallest = size_t{1} << 20;
  static constexpr size_t most = size_t{256} << 20; // bytes kept at most

  std::shared_ptr<bytes> take(size_t n) {
    if (n < smallest)
      return std::make_shared<bytes>(n);
    std::unique_ptr<bytes> b;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      // The smallest kept buffer that holds n bytes.
      auto best = free_.end();
      for (auto i = free_.begin(); i != free_.end(); ++i)
        if ((*i)->capacity() >= n &&
            (best == free_.end() || (*i)->capacity() < (*best)->capacity()))
          best = i;
      if (best != free_.end()) {
        b = std::move(*best);
        free_.erase(best);
        kept_ -= b->capacity();
      }
    }
    if (b)
      b->resize(n); // fills only what grows past its last size
    else
      b = std::make_unique<bytes>(n);
    return {b.release(), [this](bytes* x) { give(x); }};
  }

private:
  void give(bytes* x) {
    std::unique_ptr<bytes> b{x};
    std::lock_guard<std::mutex> guard{mtx_};
    if (kept_ + b->capacity() > most)
      return;
    kept_ += b->capacity();
    free_.push_back(std::move(b));
  }

  std::mutex mtx_;
  std::vector<std::unique_ptr<bytes>> free_;
  size_t kept_ = 0;
};

// Never destroyed: payloads released at exit come back to it.
payload_pool& pool() {
  static auto* p = new payload_pool;
  return *p;
}

} // namespace

data_connection::data_connection(int fd)
  : fd_(fd) {}

data_connection::~data_connection() {
  ::close(fd_);
}

bool data_connection::send(frame_kind kind, reply_status status, uint64_t id,
                           std::vector<byte_span> parts, uint16_t block16) {
  frame_header h{frame_magic,
                 static_cast<uint8_t>(kind),
                 static_cast<uint8_t>(status),
                 block16,
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
  if (!receive_header(h, max_length))
    return false;
  payload = payload_buffer(h.length);
  return read(payload->data(), h.length);
}

bool data_connection::receive_header(frame_header& h, uint64_t max_length) {
  return read_all(fd_, &h, sizeof(h)) && h.magic == frame_magic &&
         h.length <= max_length;
}

bool data_connection::read(char* at, size_t n) {
  return read_all(fd_, at, n);
}

std::shared_ptr<bytes> data_connection::payload_buffer(size_t n) {
  return pool().take(n);
}

void data_connection::close() {
  ::shutdown(fd_, SHUT_RDWR);
}

} // namespace lumen::detail
