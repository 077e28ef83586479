#pragma once

// The codecs gradients and weights take on the wire, apart from the
// compressed form (compress.hpp) so that plain rules (ps_core) can name
// them without CAF.

#include <cstddef>
#include <cstdint>

namespace lumen::ml {

enum class codec : uint8_t { none, fp16, int8 };

/// "none", "fp16", "int8".
const char* to_string(codec c) noexcept;

/// Values per int8 block; each block has a float scale of its own.
inline constexpr size_t int8_block = 256;

/// Bytes of `numel` values under `c`, scales counted (0 for a codec
/// that does not exist).
size_t compressed_size(codec c, size_t numel) noexcept;

} // namespace lumen::ml
