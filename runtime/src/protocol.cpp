#include "protocol.hpp"

#include <cstdint>
#include <tuple>

#include "lumen/errors.hpp"

namespace lumen::detail {

namespace {

enum class error_kind : uint8_t { task, actor_died, usage, other };

} // namespace

bytes encode_error(const std::exception_ptr& err) {
  try {
    std::rethrow_exception(err);
  } catch (const task_error& e) {
    return encode(error_kind::task, e.function(), e.exception_type(),
                  e.message(), e.node());
  } catch (const actor_died& e) {
    return encode(error_kind::actor_died, std::string{}, std::string{},
                  std::string{e.what()}, std::string{});
  } catch (const usage_error& e) {
    return encode(error_kind::usage, std::string{}, std::string{},
                  std::string{e.what()}, std::string{});
  } catch (const std::exception& e) {
    return encode(error_kind::other, std::string{}, current_exception_type(),
                  std::string{e.what()}, std::string{});
  } catch (...) {
    return encode(error_kind::other, std::string{}, current_exception_type(),
                  std::string{}, std::string{});
  }
}

std::exception_ptr decode_error(const bytes& payload) {
  try {
    auto [kind, fn, type, msg, node]
      = decode<error_kind, std::string, std::string, std::string,
               std::string>(payload);
    switch (kind) {
      case error_kind::task:
        return std::make_exception_ptr(task_error{fn, type, msg, node});
      case error_kind::actor_died:
        return std::make_exception_ptr(actor_died(msg));
      case error_kind::usage:
        return std::make_exception_ptr(usage_error(msg));
      default:
        return std::make_exception_ptr(error(type + ": " + msg));
    }
  } catch (const codec_error& e) {
    return std::make_exception_ptr(e);
  }
}

} // namespace lumen::detail
