#include "lumen/errors.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <iterator>
#include <memory>
#include <typeinfo>

#include "lumen/channel.hpp"

#include "core/error_table.hpp"

namespace lumen {

namespace {

// The class each code is thrown as when the runtime makes the error from a
// code alone: a refusal of the control plane, a failure from another
// process. Classes that carry more than a message (task_error) are made
// where their fields are.
enum class thrown_as {
  error,
  usage,
  task,
  actor_died,
  owner_died,
  cancelled,
  timeout,
  channel
};

struct row {
  errc code;
  const char* name;
  thrown_as cls;
};

constexpr row table[] = {
  {errc::unspecified, "unspecified", thrown_as::error},
  {errc::usage, "usage", thrown_as::usage},
  {errc::task_failed, "task_failed", thrown_as::task},
  {errc::actor_died, "actor_died", thrown_as::actor_died},
  {errc::timeout, "timeout", thrown_as::timeout},
  {errc::unreachable, "unreachable", thrown_as::error},
  {errc::head_unreachable, "head_unreachable", thrown_as::error},
  {errc::wrong_token, "wrong_token", thrown_as::error},
  {errc::bad_token_file, "bad_token_file", thrown_as::usage},
  {errc::no_such_node, "no_such_node", thrown_as::error},
  {errc::node_dead, "node_dead", thrown_as::error},
  {errc::not_registered, "not_registered", thrown_as::usage},
  {errc::name_taken, "name_taken", thrown_as::usage},
  {errc::tls_mismatch, "tls_mismatch", thrown_as::error},
  {errc::channel_closed, "channel_closed", thrown_as::channel},
  {errc::owner_died, "owner_died", thrown_as::owner_died},
  {errc::task_cancelled, "task_cancelled", thrown_as::cancelled},
  {errc::infeasible, "infeasible", thrown_as::usage},
  {errc::peer_lost, "peer_lost", thrown_as::error},
  {errc::mismatch, "mismatch", thrown_as::error},
  {errc::missing_file, "missing_file", thrown_as::error},
  {errc::bad_file, "bad_file", thrown_as::error},
  {errc::write_failed, "write_failed", thrown_as::error},
};

// Rows in the enum's order, so that a code finds its row by its value.
constexpr bool rows_in_order() {
  for (size_t i = 0; i < std::size(table); ++i)
    if (static_cast<size_t>(table[i].code) != i + 1)
      return false;
  return true;
}
static_assert(rows_in_order(), "one row per errc, in the enum's order");

const row* row_of(errc code) {
  auto i = static_cast<size_t>(code);
  return i >= 1 && i <= std::size(table) ? &table[i - 1] : nullptr;
}

} // namespace

const char* to_string(errc code) noexcept {
  auto* r = row_of(code);
  return r != nullptr ? r->name : "unknown";
}

task_error::task_error(std::string function, std::string exception_type,
                       std::string message, std::string node)
  // Copies, not moves: the arguments' order of evaluation is unspecified.
  : task_error("task " + function + " failed on node " + node + ": " +
                 exception_type + ": " + message,
               function, exception_type, message, node) {}

task_error::task_error(std::string what, std::string function,
                       std::string exception_type, std::string message,
                       std::string node)
  : error(what, errc::task_failed)
  , function_(std::move(function))
  , type_(std::move(exception_type))
  , message_(std::move(message))
  , node_(std::move(node)) {}

namespace detail {

std::exception_ptr make_error(errc code, const std::string& what) {
  auto* r = row_of(code);
  switch (r != nullptr ? r->cls : thrown_as::error) {
    case thrown_as::usage:
      return std::make_exception_ptr(usage_error(what, code));
    case thrown_as::actor_died:
      return std::make_exception_ptr(actor_died(what, code));
    case thrown_as::owner_died:
      return std::make_exception_ptr(owner_died(what));
    case thrown_as::cancelled:
      return std::make_exception_ptr(task_cancelled(what));
    case thrown_as::timeout:
      return std::make_exception_ptr(get_timeout(what));
    case thrown_as::channel:
      return std::make_exception_ptr(channel_error(what, code));
    case thrown_as::error:
    case thrown_as::task:
      break;
  }
  return std::make_exception_ptr(error(what, code));
}

std::string demangle(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name{
    abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free};
  return status == 0 && name ? std::string{name.get()} : std::string{mangled};
}

std::string current_exception_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "(not derived from std::exception)";
  }
}

std::string current_exception_type() {
  auto* type = abi::__cxa_current_exception_type();
  return type == nullptr ? std::string{"unknown exception"}
                         : demangle(type->name());
}

} // namespace detail

} // namespace lumen
