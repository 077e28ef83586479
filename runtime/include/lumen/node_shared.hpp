#pragma once

// Node-local shared objects: one copy of read-only bytes per machine, in
// shared memory that every process of that machine maps, whatever cluster
// or run it belongs to. A data set that four worker processes of a node
// read is loaded once and held once:
//
//   auto block = lumen::node_shared("fashion-mnist.train", [] {
//     return load_and_normalise(); // runs in the first process only
//   });
//   use(block->data(), block->size()); // in place, read-only
//
// The first process to ask for a name makes the block; the others wait for
// it and map it. A maker that dies half way leaves nothing behind that
// others would read: the next process to ask makes it again. The block is
// removed when the last process that maps it lets go; if every process
// that mapped it was killed, the next Lumen process to start on the
// machine (lumen::init) removes it.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace lumen {

class shared_block;

namespace detail {

/// The block `name`, made by `make` (given the open, locked file) if no
/// process here has it; both node_shared forms.
std::shared_ptr<const shared_block>
open_shared_block(const std::string& name,
                  const std::function<void(int fd)>& make);

} // namespace detail

/// A node-local shared object, mapped read-only.
class shared_block {
public:
  ~shared_block();

  shared_block(const shared_block&) = delete;
  shared_block& operator=(const shared_block&) = delete;

  const char* data() const noexcept {
    return data_;
  }
  size_t size() const noexcept {
    return size_;
  }

  /// The name it was opened under.
  const std::string& name() const noexcept {
    return name_;
  }

  /// True if this process made it rather than mapping another's.
  bool made_here() const noexcept {
    return made_here_;
  }

private:
  friend std::shared_ptr<const shared_block>
  detail::open_shared_block(const std::string&,
                            const std::function<void(int)>&);

  shared_block() = default;

  std::string name_;
  std::string path_; // in /dev/shm
  int fd_ = -1;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const char* data_ = nullptr;
  size_t size_ = 0;
  bool made_here_ = false;
};

/// The block called `name` on this machine: made from what `make` returns
/// (run in this process, copied into shared memory once) if no process
/// here has it, else mapped from the one that made it. `name` may hold
/// letters, digits and ".-_" (at most 200 of them); give it what makes the
/// contents differ (a file's version, a seed). Throws `usage_error` for a
/// bad name, `error` if shared memory fails (/dev/shm full: the message
/// says how much was asked), and what `make` throws.
std::shared_ptr<const shared_block>
node_shared(const std::string& name,
            const std::function<std::vector<char>()>& make);

/// As above, for a maker that writes in place: in the first process only,
/// `size()` says how many bytes the block holds (it may read what it needs
/// to know), then `fill` writes them straight into shared memory, with no
/// copy of them made (a data set of hundreds of megabytes in one pass).
std::shared_ptr<const shared_block>
node_shared(const std::string& name, const std::function<size_t()>& size,
            const std::function<void(char* out)>& fill);

namespace detail {

/// Removes this user's blocks on this machine that no process maps (their
/// processes were all killed): lumen::init calls it.
void reclaim_unmapped_blocks() noexcept;

} // namespace detail

} // namespace lumen
