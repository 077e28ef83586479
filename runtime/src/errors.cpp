#include "lumen/errors.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <typeinfo>

namespace lumen {

task_error::task_error(std::string function, std::string exception_type,
                       std::string message, std::string node)
  : error("task " + function + " failed on node " + node + ": "
          + exception_type + ": " + message),
    function_(std::move(function)),
    type_(std::move(exception_type)),
    message_(std::move(message)),
    node_(std::move(node)) {
}

namespace detail {

std::string demangle(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name{
    abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free};
  return status == 0 && name ? std::string{name.get()} : std::string{mangled};
}

std::string current_exception_type() {
  auto* type = abi::__cxa_current_exception_type();
  return type == nullptr ? std::string{"unknown exception"}
                         : demangle(type->name());
}

} // namespace detail

} // namespace lumen
