#include "transport/data_plane.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <system_error>
#include <vector>

#include "objects/shared_arena.hpp"
#include "transport/socket_io.hpp"

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

data_connection::data_connection(gated_socket link)
  : link_(std::move(link)) {}

data_connection::~data_connection() {
  {
    std::lock_guard<std::mutex> guard{later_mtx_};
    stopping_ = true;
  }
  later_cv_.notify_all();
  if (writer_.joinable())
    writer_.join(); // what is queued is written (or fails at once if closed)
}

namespace {

void count_sent(size_t bytes) {
  auto& c = shared_memory_counted();
  c.blocks_sent.fetch_add(1, std::memory_order_relaxed);
  c.bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
}

// Landings a peer may have named and not yet been answered at: each is
// two words of memory, but a peer is not allowed them without end.
constexpr size_t max_landings = 4096;

} // namespace

bool data_connection::send(frame_kind kind, reply_status status, uint64_t id,
                           std::vector<byte_span> parts, size_t block_at,
                           const landing& to, frame_hold hold) {
  size_t size = 0;
  for (auto& p : parts)
    size += p.size;
  if (hold.owner && size >= written_later_from && !same_host_ && has_writer()) {
    write_later(kind, status, id, parts, block_at, std::move(hold));
    return true;
  }
  if (kind == frame_kind::typed) { // after the requests queued before it
    std::unique_lock<std::mutex> lock{later_mtx_};
    later_cv_.wait(lock, [this] { return later_.empty(); });
  }
  return write_frame(kind, status, id, parts, block_at, to);
}

void data_connection::write_later(frame_kind kind, reply_status status,
                                  uint64_t id,
                                  const std::vector<byte_span>& parts,
                                  size_t block_at, frame_hold hold) {
  later_frame f{kind, status, id, block_at, {}, {}, std::move(hold)};
  auto held = [&f](const byte_span& p) {
    auto& b = f.hold.blocks;
    return std::find(b.begin(), b.end(), p.data) != b.end();
  };
  size_t copied = 0;
  for (auto& p : parts)
    copied += held(p) ? 0 : p.size;
  f.copied.resize(copied);
  copied = 0;
  for (auto& p : parts) {
    if (held(p) || p.size == 0) {
      f.parts.push_back(p);
      continue;
    }
    std::memcpy(f.copied.data() + copied, p.data, p.size);
    f.parts.push_back({f.copied.data() + copied, p.size});
    copied += p.size;
  }
  std::lock_guard<std::mutex> guard{later_mtx_};
  later_.push_back(std::move(f)); // the copies stay where the parts say
  later_cv_.notify_all();
}

bool data_connection::has_writer() {
  std::lock_guard<std::mutex> guard{later_mtx_};
  if (!writer_.joinable()) {
    try {
      writer_ = std::thread{[this] { writer_loop(); }};
    } catch (const std::system_error&) {
      return false; // no thread to spare: the caller writes it
    }
  }
  return true;
}

void data_connection::writer_loop() {
  std::unique_lock<std::mutex> lock{later_mtx_};
  bool failed = false;
  for (;;) {
    later_cv_.wait(lock, [this] { return stopping_ || !later_.empty(); });
    if (later_.empty())
      return;
    auto& f = later_.front(); // pushes behind it leave it where it is
    lock.unlock();
    if (!failed &&
        !write_frame(f.kind, f.status, f.id, f.parts, f.block_at, {})) {
      failed = true;
      close(); // the reader fails what waits for an answer
    }
    lock.lock();
    later_.pop_front();
    later_cv_.notify_all();
  }
}

bool data_connection::write_frame(frame_kind kind, reply_status status,
                                  uint64_t id,
                                  const std::vector<byte_span>& parts,
                                  size_t block_at, const landing& to) {
  // Said in a reply's header where it fits (block_at is a multiple of 16).
  auto block16 = kind == frame_kind::reply && block_at / 16 <= UINT16_MAX
                   ? block_at / 16
                   : 0;
  frame_header h{frame_magic,
                 static_cast<uint8_t>(kind),
                 static_cast<uint8_t>(status),
                 static_cast<uint16_t>(block16),
                 id,
                 0};
  const byte_span* block = nullptr; // the part at block_at
  for (size_t i = 0, at = 0; block_at != 0 && i < parts.size(); ++i) {
    if (at == block_at)
      block = &parts[i];
    at += parts[i].size;
  }
  // A reply's block goes to the landing its request named, if it fits,
  // under the lock that close() takes: once the link is closed, the
  // caller may use the place again, and nothing is written there.
  named_landing wrote{};
  if (kind == frame_kind::reply) {
    std::lock_guard<std::mutex> guard{landings_mtx_};
    if (auto i = landings_.find(id); i != landings_.end()) {
      if (block != nullptr && block->size == i->second.size) {
        std::memcpy(i->second.at, block->data, block->size);
        wrote = i->second;
        count_sent(block->size);
      }
      landings_.erase(i);
    }
  }
  // Said first in the payload: the landing this request names, then
  // where its block is in shared memory.
  shared_block named{}, shared{};
  std::vector<iovec> iov;
  iov.push_back({&h, sizeof(h)});
  std::lock_guard<std::mutex> guard{write_mtx_};
  if (kind == frame_kind::typed && to.size >= shared_arena::smallest_block &&
      sending_) {
    if (auto where = sending_->offset_of(to.at, to.size)) {
      named = {0, to.size, *where};
      h.kind |= kind_landing;
      iov.push_back({&named, sizeof(named)});
      h.length += sizeof(named);
    }
  }
  if (block != nullptr && wrote.size != 0) {
    shared = {block_at, block->size, wrote.where};
    h.kind |= kind_landing;
  } else if (block != nullptr && sending_ &&
             block->size >= shared_arena::smallest_block) {
    if (auto where = sending_->put(*block)) {
      shared = {block_at, block->size, *where};
      h.kind |= kind_shared_block;
      count_sent(block->size);
    }
  }
  if (shared.size != 0) { // said before the payload, left out of it
    h.block16 = 0;
    iov.push_back({&shared, sizeof(shared)});
    h.length += sizeof(shared);
  }
  for (auto& p : parts) {
    if (&p == block && shared.size != 0)
      continue;
    h.length += p.size;
    if (p.size > 0)
      iov.push_back({const_cast<char*>(p.data), p.size});
  }
  return write_all(link_, iov.data(), static_cast<int>(iov.size()));
}

bool data_connection::receive(frame_header& h, std::shared_ptr<bytes>& payload,
                              uint64_t max_length, landed_block& block) {
  if (!receive_header(h, max_length, block))
    return false;
  payload = payload_buffer(h.length);
  return read(payload->data(), h.length);
}

bool data_connection::receive_header(frame_header& h, uint64_t max_length,
                                     landed_block& block) {
  block = {};
  if (!read_all(link_, &h, sizeof(h)) || h.magic != frame_magic ||
      h.length > max_length)
    return false;
  uint8_t flags = h.kind & (kind_shared_block | kind_landing);
  if (flags == 0)
    return true;
  // Blocks and landings in shared memory: on a link that agreed on it,
  // inside the arena and the payload, or the frame is junk.
  h.kind &= static_cast<uint8_t>(~flags);
  bool reply = h.kind == static_cast<uint8_t>(frame_kind::reply);
  shared_block d{};
  auto take = [&] {
    if (h.length < sizeof(d) || !read_all(link_, &d, sizeof(d)))
      return false;
    h.length -= sizeof(d);
    return true;
  };
  if (reply && flags == kind_landing) { // at this process's landing
    // The reader checks that it is the landing the request named.
    auto arena = shared_arena::own();
    if (!arena || !take() || d.offset > h.length)
      return false;
    char* at = arena->place(d.where, d.size);
    block = {d.offset, {at, d.size, nullptr}, true};
    return at != nullptr;
  }
  if ((flags & kind_landing) != 0) { // where the answer may go
    if (h.kind != static_cast<uint8_t>(frame_kind::typed) || !reading_ ||
        !take())
      return false;
    char* at = reading_->place(d.where, d.size);
    std::lock_guard<std::mutex> guard{landings_mtx_};
    if (at != nullptr && !closed_ && landings_.size() < max_landings)
      landings_[h.id] = {at, d.where, d.size};
  }
  if ((flags & kind_shared_block) == 0)
    return true;
  if (!reading_ || !take() || d.offset > h.length)
    return false;
  block = {d.offset, reading_->view(d.where, d.size)};
  return block.place.size != 0;
}

void data_connection::read_shared(std::shared_ptr<shared_arena> arena) {
  same_host_ = true;
  reading_ = std::move(arena);
}

void data_connection::send_shared(std::shared_ptr<shared_arena> arena) {
  same_host_ = true;
  std::lock_guard<std::mutex> guard{write_mtx_};
  sending_ = std::move(arena);
}

bool data_connection::read(char* at, size_t n) {
  return read_all(link_, at, n);
}

std::shared_ptr<bytes> data_connection::payload_buffer(size_t n) {
  return pool().take(n);
}

std::shared_ptr<bytes> put_back_together(const bytes& frame,
                                         const landed_block& block) {
  auto whole = data_connection::payload_buffer(frame.size() + block.place.size);
  auto at = static_cast<std::ptrdiff_t>(block.offset);
  auto out = std::copy(frame.begin(), frame.begin() + at, whole->begin());
  out = std::copy(block.place.at, block.place.at + block.place.size, out);
  std::copy(frame.begin() + at, frame.end(), out);
  return whole;
}

void data_connection::close() {
  ::shutdown(link_.fd, SHUT_RDWR);
  std::lock_guard<std::mutex> guard{landings_mtx_};
  closed_ = true;
  landings_.clear();
}

} // namespace lumen::detail
