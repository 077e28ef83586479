#include "lumen/detail/codec.hpp"

#include <string>

namespace lumen::detail {

void reader::finish() const {
  if (pos_ != size_)
    throw codec_error("malformed message: " + std::to_string(size_ - pos_) +
                      " bytes left over after decoding " +
                      std::to_string(pos_) + " of " + std::to_string(size_) +
                      "; sender and receiver disagree on the types (are "
                      "all nodes running the same code?)");
}

void reader::truncated(size_t wanted) const {
  throw codec_error("malformed message: needed " + std::to_string(wanted) +
                    " more bytes at offset " + std::to_string(pos_) + " of " +
                    std::to_string(size_) +
                    "; sender and receiver disagree on the types (are all "
                    "nodes running the same code?)");
}

void reader::oversized(uint64_t n) const {
  throw codec_error("malformed message: a sequence claims " +
                    std::to_string(n) + " elements but only " +
                    std::to_string(size_ - pos_) + " bytes are left");
}

} // namespace lumen::detail
