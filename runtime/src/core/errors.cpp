#include "lumen/errors.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <typeinfo>

namespace lumen {

const char* to_string(errc code) noexcept {
  switch (code) {
    case errc::unspecified:
      return "unspecified";
    case errc::usage:
      return "usage";
    case errc::task_failed:
      return "task_failed";
    case errc::actor_died:
      return "actor_died";
    case errc::timeout:
      return "timeout";
    case errc::unreachable:
      return "unreachable";
    case errc::head_unreachable:
      return "head_unreachable";
    case errc::wrong_token:
      return "wrong_token";
    case errc::bad_token_file:
      return "bad_token_file";
    case errc::tls_mismatch:
      return "tls_mismatch";
    case errc::channel_closed:
      return "channel_closed";
    case errc::no_such_node:
      return "no_such_node";
    case errc::node_dead:
      return "node_dead";
    case errc::not_registered:
      return "not_registered";
    case errc::name_taken:
      return "name_taken";
    case errc::owner_died:
      return "owner_died";
    case errc::task_cancelled:
      return "task_cancelled";
    case errc::infeasible:
      return "infeasible";
  }
  return "unknown";
}

task_error::task_error(std::string function, std::string exception_type,
                       std::string message, std::string node)
  : error("task " + function + " failed on node " + node + ": " +
            exception_type + ": " + message,
          errc::task_failed)
  , function_(std::move(function))
  , type_(std::move(exception_type))
  , message_(std::move(message))
  , node_(std::move(node)) {}

namespace detail {

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
