#include "transport/protocol.hpp"

#include <cstdint>
#include <tuple>

#include "lumen/errors.hpp"

namespace lumen::detail {

namespace {

enum class error_kind : uint8_t {
  task,
  actor_died,
  usage,
  other,
  owner_died,
  cancelled,
};

const auto lumen_category = caf::atom("lumen");

// Which of Lumen's error classes `e` is, so that the receiver rethrows the
// same class.
error_kind kind_of(const error& e) {
  if (dynamic_cast<const actor_died*>(&e) != nullptr)
    return error_kind::actor_died;
  if (dynamic_cast<const owner_died*>(&e) != nullptr)
    return error_kind::owner_died;
  if (dynamic_cast<const task_cancelled*>(&e) != nullptr)
    return error_kind::cancelled;
  if (dynamic_cast<const usage_error*>(&e) != nullptr)
    return error_kind::usage;
  return error_kind::other;
}

} // namespace

caf::error make_control_error(errc code, std::string text) {
  return caf::error{static_cast<uint8_t>(code), lumen_category,
                    caf::make_message(std::move(text))};
}

caf::error control_refusal(const std::exception_ptr& err) {
  try {
    std::rethrow_exception(err);
  } catch (const error& e) {
    return make_control_error(e.code(), e.what());
  } catch (const std::exception& e) {
    return make_control_error(errc::usage, e.what());
  }
}

void throw_control_error(caf::actor_system& sys, const caf::error& err,
                         const std::string& context, errc fallback) {
  if (err.category() != lumen_category ||
      !err.context().match_elements<std::string>())
    throw error(context + " (" + sys.render(err) + ")", fallback);
  auto code = static_cast<errc>(err.code());
  auto text = context + ": " + err.context().get_as<std::string>(0);
  if (code == errc::usage || code == errc::not_registered ||
      code == errc::name_taken || code == errc::infeasible)
    throw usage_error(text, code);
  throw error(text, code);
}

bytes encode_error(const std::exception_ptr& err) {
  auto code = errc::unspecified;
  auto kind = error_kind::other;
  std::string fn, type, msg, node;
  try {
    std::rethrow_exception(err);
  } catch (const task_error& e) {
    kind = error_kind::task;
    code = e.code();
    fn = e.function();
    type = e.exception_type();
    msg = e.message();
    node = e.node();
  } catch (const error& e) {
    kind = kind_of(e);
    code = e.code();
    msg = e.what();
  } catch (...) {
    type = current_exception_type();
    msg = current_exception_message();
  }
  return encode(kind, code, fn, type, msg, node);
}

std::exception_ptr decode_error(const bytes& payload) {
  try {
    auto [kind, code, fn, type, msg, node] =
      decode<error_kind, errc, std::string, std::string, std::string,
             std::string>(payload);
    switch (kind) {
      case error_kind::task:
        return std::make_exception_ptr(task_error{fn, type, msg, node});
      case error_kind::actor_died:
        return std::make_exception_ptr(actor_died(msg, code));
      case error_kind::usage:
        return std::make_exception_ptr(usage_error(msg, code));
      case error_kind::owner_died:
        return std::make_exception_ptr(owner_died(msg));
      case error_kind::cancelled:
        return std::make_exception_ptr(task_cancelled(msg));
      default:
        return std::make_exception_ptr(
          error(type.empty() ? msg : type + ": " + msg, code));
    }
  } catch (const codec_error& e) {
    return std::make_exception_ptr(e);
  }
}

} // namespace lumen::detail
