#include "transport/protocol.hpp"

#include <cstdint>
#include <tuple>

#include "lumen/errors.hpp"

#include "core/error_table.hpp"

namespace lumen::detail {

namespace {

const auto lumen_category = caf::atom("lumen");

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
  std::rethrow_exception(
    make_error(static_cast<errc>(err.code()),
               context + ": " + err.context().get_as<std::string>(0)));
}

bytes encode_error(const std::exception_ptr& err) {
  auto code = errc::unspecified;
  std::string fn, type, msg, node;
  try {
    std::rethrow_exception(err);
  } catch (const task_error& e) {
    code = e.code();
    fn = e.function();
    type = e.exception_type();
    msg = e.message();
    node = e.node();
  } catch (const error& e) {
    code = e.code();
    msg = e.what();
  } catch (...) {
    type = current_exception_type();
    msg = current_exception_message();
  }
  return encode(code, fn, type, msg, node);
}

std::exception_ptr decode_error(const bytes& payload) {
  try {
    auto [code, fn, type, msg, node] =
      decode<errc, std::string, std::string, std::string, std::string>(payload);
    if (!fn.empty())
      return std::make_exception_ptr(task_error{fn, type, msg, node});
    return make_error(code, type.empty() ? msg : type + ": " + msg);
  } catch (const codec_error& e) {
    return std::make_exception_ptr(e);
  }
}

} // namespace lumen::detail
