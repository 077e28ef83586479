#pragma once

#include "lumen/detail/object_state.hpp"

namespace lumen::detail {

/// Marks `work` as what the calling thread runs, for `lumen::cancelled()`,
/// while alive.
class running_scope {
public:
  explicit running_scope(const cancellable& work);
  ~running_scope();

  running_scope(const running_scope&) = delete;
  running_scope& operator=(const running_scope&) = delete;

private:
  const cancellable* saved_;
};

} // namespace lumen::detail
