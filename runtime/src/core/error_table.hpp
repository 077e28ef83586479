#pragma once

#include <exception>
#include <string>

#include "lumen/errors.hpp"

namespace lumen::detail {

/// The exception `code` is thrown as (its row in the table), saying `what`:
/// what the control plane and another process's failures arrive as.
std::exception_ptr make_error(errc code, const std::string& what);

} // namespace lumen::detail
