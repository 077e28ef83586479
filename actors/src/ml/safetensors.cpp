#include "lumen/ml/safetensors.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "lumen/util/files.hpp"
#include "ml/durable_file.hpp"

namespace lumen::ml {

namespace {

// The format is little-endian, as this machine's tensors are.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors stores little-endian bytes");

/// Headers past this are not checkpoints but damage (or an attack).
constexpr uint64_t largest_header = 100u << 20;

const char* code_of(dtype t) {
  switch (t) {
    case dtype::float32:
      return "F32";
    case dtype::float64:
      return "F64";
    case dtype::int32:
      return "I32";
    case dtype::int64:
      return "I64";
  }
  return "?";
}

/// Each tensor's checksum is kept in the metadata under this prefix and
/// its name, as 8 hex digits of the CRC-32 of its bytes (zlib's, so that
/// Python checks it with zlib.crc32); the metadata's own under this
/// prefix alone. Other readers see plain metadata.
constexpr const char* checksum_prefix = "lumen.crc32";

uint32_t crc32_of(const char* data, size_t n) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i)
    c = table[(c ^ static_cast<uint8_t>(data[i])) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

/// The metadata key of tensor `name`'s checksum.
std::string checksum_key(const std::string& name) {
  return std::string{checksum_prefix} + "." + name;
}

bool is_checksum_key(const std::string& key) {
  return key == checksum_prefix || key.rfind(checksum_key(""), 0) == 0;
}

std::string hex_of(uint32_t x) {
  char out[9];
  std::snprintf(out, sizeof out, "%08x", x);
  return out;
}

/// The metadata's checksum: its keys and values in order, each ended by a
/// zero byte, the checksums left out.
uint32_t metadata_crc(const std::map<std::string, std::string>& metadata) {
  std::string all;
  for (auto& [key, value] : metadata)
    if (!is_checksum_key(key))
      all.append(key).append(1, '\0').append(value).append(1, '\0');
  return crc32_of(all.data(), all.size());
}

[[noreturn]] void fail(const std::string& path, const std::string& what,
                       errc code = errc::bad_file) {
  throw data_error("safetensors file '" + path + "': " + what, code);
}

dtype dtype_of_code(const std::string& path, const std::string& name,
                    const std::string& code) {
  for (auto t : {dtype::float32, dtype::float64, dtype::int32, dtype::int64})
    if (code == code_of(t))
      return t;
  fail(path, "tensor '" + name + "' has dtype '" + code +
               "'; Lumen reads F32, F64, I32 and I64");
}

/// Checks a file's tensors and metadata against the checksums its writer
/// kept, and takes those out of its metadata. A file with none (written
/// by another tool) is taken as it is.
void verify_checksums(const std::string& path, safetensors_file& file) {
  auto& meta = file.metadata;
  if (std::none_of(meta.begin(), meta.end(),
                   [](auto& kv) { return is_checksum_key(kv.first); }))
    return;
  auto own = meta.find(checksum_prefix);
  auto damaged = "; the file is damaged (a flipped bit, a torn write): take "
                 "another checkpoint";
  if (own == meta.end() || own->second != hex_of(metadata_crc(meta)))
    fail(path,
         std::string{"its metadata does not match its checksum"} + damaged);
  for (auto& [name, t] : file.tensors) {
    auto kept = meta.find(checksum_key(name));
    if (kept == meta.end())
      fail(path, "tensor '" + name +
                   "' has no checksum while the file's others do" + damaged);
    auto now = hex_of(crc32_of(t.raw(), t.nbytes()));
    if (kept->second != now)
      fail(path, "tensor '" + name + "' does not match its checksum (kept " +
                   kept->second + ", its bytes give " + now + ")" + damaged);
  }
  for (auto i = meta.begin(); i != meta.end();) {
    if (!is_checksum_key(i->first)) {
      ++i;
      continue;
    }
    if (i->first != checksum_prefix) {
      auto name = i->first.substr(checksum_key("").size());
      if (file.tensors.count(name) == 0)
        fail(path, "has a checksum for a tensor '" + name +
                     "' it does not hold" + damaged);
    }
    i = meta.erase(i);
  }
}

} // namespace

std::vector<char> safetensors_bytes(const safetensors_file& file) {
  nlohmann::json header = nlohmann::json::object();
  auto metadata = file.metadata;
  uint64_t offset = 0;
  for (auto& [name, t] : file.tensors) {
    header[name] = {{"dtype", code_of(t.type())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
    metadata[checksum_key(name)] = hex_of(crc32_of(t.raw(), t.nbytes()));
  }
  metadata[checksum_prefix] = hex_of(metadata_crc(metadata));
  header["__metadata__"] = metadata;
  auto text = header.dump();
  // Padded with spaces to 8 bytes, so that the tensors start aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t n = text.size();
  std::vector<char> out(sizeof n + n + offset);
  std::memcpy(out.data(), &n, sizeof n);
  std::memcpy(out.data() + sizeof n, text.data(), n);
  auto at = out.data() + sizeof n + n;
  for (auto& [name, t] : file.tensors) {
    if (t.nbytes() > 0)
      std::memcpy(at, t.raw(), t.nbytes());
    at += t.nbytes();
  }
  return out;
}

void save_safetensors(const std::string& path, const safetensors_file& file) {
  try {
    detail::replace_synced(path, safetensors_bytes(file));
  } catch (const data_error& e) {
    fail(path, std::string{"cannot be saved: "} + e.what(), e.code());
  }
}

safetensors_file load_safetensors(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    fail(path,
         "cannot be opened; check the path (checkpoints are written "
         "on the node that saved them)",
         errc::missing_file);
  return parse_safetensors(util::read_rest<std::vector<char>>(in), path);
}

safetensors_file parse_safetensors(const std::vector<char>& bytes,
                                   const std::string& path) {
  uint64_t n = 0;
  if (bytes.size() < sizeof n)
    fail(path, "is " + std::to_string(bytes.size()) +
                 " bytes, shorter than the 8-byte header length");
  std::memcpy(&n, bytes.data(), sizeof n);
  if (n > largest_header || n > bytes.size() - sizeof n)
    fail(path, "announces a header of " + std::to_string(n) + " bytes in a " +
                 std::to_string(bytes.size()) +
                 "-byte file; it is truncated or not a safetensors file");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + sizeof n,
                                   bytes.begin() + sizeof n +
                                     static_cast<std::ptrdiff_t>(n));
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string{"has a malformed JSON header ("} + e.what() + ")");
  }
  if (!header.is_object())
    fail(path, "has a header that is not a JSON object");
  auto data_begin = sizeof n + n;
  auto data_size = bytes.size() - data_begin;
  safetensors_file out;
  // Byte ranges, to check they tile the data without gaps or overlaps.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  try {
    for (auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        for (auto& [key, value] : entry.items())
          out.metadata[key] = value.get<std::string>();
        continue;
      }
      auto type =
        dtype_of_code(path, name, entry.at("dtype").get<std::string>());
      auto shape = entry.at("shape").get<std::vector<int64_t>>();
      auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] ||
          offsets[1] > data_size)
        fail(path, "tensor '" + name + "' lies outside the file's " +
                     std::to_string(data_size) + " data bytes");
      tensor t;
      try {
        t = tensor(shape, type);
      } catch (const usage_error& e) {
        fail(path, "tensor '" + name + "': " + e.what());
      }
      if (t.nbytes() != offsets[1] - offsets[0])
        fail(path, "tensor '" + name + "' of shape " + t.describe() +
                     " needs " + std::to_string(t.nbytes()) + " bytes, its " +
                     "range holds " + std::to_string(offsets[1] - offsets[0]));
      if (t.nbytes() > 0)
        std::memcpy(t.raw(), bytes.data() + data_begin + offsets[0],
                    t.nbytes());
      ranges.emplace_back(offsets[0], offsets[1]);
      out.tensors.emplace(name, std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string{"has a header entry of the wrong form ("} +
                 e.what() + ")");
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (auto& [begin, end] : ranges) {
    if (begin != at)
      fail(path, "has tensors whose byte ranges overlap or leave a gap at "
                 "byte " +
                   std::to_string(at));
    at = end;
  }
  if (at != data_size)
    fail(path, "has " + std::to_string(data_size - at) +
                 " bytes after its last tensor");
  verify_checksums(path, out);
  return out;
}

} // namespace lumen::ml
