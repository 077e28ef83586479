#include "lumen/ml/safetensors.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include <nlohmann/json.hpp>

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

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw data_error("safetensors file '" + path + "': " + what);
}

dtype dtype_of_code(const std::string& path, const std::string& name,
                    const std::string& code) {
  for (auto t : {dtype::float32, dtype::float64, dtype::int32, dtype::int64})
    if (code == code_of(t))
      return t;
  fail(path, "tensor '" + name + "' has dtype '" + code +
               "'; Lumen reads F32, F64, I32 and I64");
}

} // namespace

std::vector<char> safetensors_bytes(const safetensors_file& file) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (auto& [name, t] : file.tensors) {
    header[name] = {{"dtype", code_of(t.type())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  if (!file.metadata.empty())
    header["__metadata__"] = file.metadata;
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
  auto bytes = safetensors_bytes(file);
  auto tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out{tmp, std::ios::binary | std::ios::trunc};
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush())
      fail(path, "cannot be written; give a path in a directory you may "
                 "write to, with room for " +
                   std::to_string(bytes.size()) + " bytes");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(path, "cannot be put in place (rename failed)");
  }
}

safetensors_file load_safetensors(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    fail(path, "cannot be opened; check the path (checkpoints are written "
               "on the node that saved them)");
  return parse_safetensors(
    {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}},
    path);
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
  return out;
}

} // namespace lumen::ml
