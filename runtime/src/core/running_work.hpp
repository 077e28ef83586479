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

/// The calling thread's running work itself. The simulated cluster's
/// fibers share one thread: each keeps its own and swaps it in to run.
const cancellable*& running_work_slot();

} // namespace lumen::detail
