#include "sim/sim_fiber.hpp"

#include <utility>

#include <boost/context/protected_fixedsize_stack.hpp>

#include "core/actor_host.hpp"
#include "core/running_work.hpp"
#include "sim/sim_world.hpp"

// The fibers of a simulated run: made, reused, switched to and from.

namespace lumen::detail::sim {

namespace {

/// A fiber's stack; a guard page below it turns an overflow into a crash
/// at the spot instead of silent corruption.
constexpr size_t stack_bytes = 512 * 1024;

// AddressSanitizer must be told of each switch between stacks, or it
// takes a fiber's frames for the script's (sanitizer/common_interface_defs.h).
#if defined(__SANITIZE_ADDRESS__)
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom,
                                    size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save,
                                     const void** bottom_old, size_t* size_old);
void __asan_unpoison_memory_region(const volatile void* addr, size_t size);
}
#else
inline void __sanitizer_start_switch_fiber(void**, const void*, size_t) {}
inline void __sanitizer_finish_switch_fiber(void*, const void**, size_t*) {}
inline void __asan_unpoison_memory_region(const volatile void*, size_t) {}
#endif

/// The script's stack, as ASan learns it at the first switch back.
const void* script_stack = nullptr;
size_t script_stack_size = 0;

/// The fibers' stacks, each recorded in its fiber (for ASan); a guard
/// page below each.
class recorded_stack {
public:
  explicit recorded_stack(fiber& f)
    : f_(&f) {}

  boost::context::stack_context allocate() {
    auto sc = inner_.allocate();
    f_->stack = static_cast<char*>(sc.sp) - sc.size;
    f_->stack_size = sc.size;
    return sc;
  }
  void deallocate(boost::context::stack_context& sc) noexcept {
    // A killed fiber's frames never returned, and ASan keeps their locals
    // poisoned past the unmapping: a stack mapped there later would see
    // its own locals as out of scope.
    __asan_unpoison_memory_region(static_cast<char*>(sc.sp) - sc.size, sc.size);
    inner_.deallocate(sc);
  }

private:
  boost::context::protected_fixedsize_stack inner_{stack_bytes};
  fiber* f_;
};

} // namespace

void fiber::yield(bool last) {
  __sanitizer_start_switch_fiber(last ? nullptr : &fake_stack, script_stack,
                                 script_stack_size);
  if (!last)
    back = std::move(back).resume();
}

void fiber::arrived() {
  __sanitizer_finish_switch_fiber(fake_stack, &script_stack,
                                  &script_stack_size);
}

fiber& world::idle_fiber() {
  if (!idle_.empty()) {
    auto* f = idle_.back();
    idle_.pop_back();
    return *f;
  }
  fibers_.push_back(std::make_unique<fiber>());
  auto* f = fibers_.back().get();
  f->ctx = boost::context::fiber{std::allocator_arg, recorded_stack{*f},
                                 [f](boost::context::fiber&& back) {
                                   f->back = std::move(back);
                                   f->arrived();
                                   // Resumed with nothing to do: the run is
                                   // over.
                                   while (f->job) {
                                     try {
                                       f->job();
                                     } catch (...) {
                                       f->failure = std::current_exception();
                                     }
                                     f->job = nullptr;
                                     f->yield();
                                     f->arrived();
                                   }
                                   f->yield(true);
                                   return std::move(f->back);
                                 }};
  return *f;
}

void world::resume(fiber& f) {
  current_ = &f;
  std::swap(running_work_slot(), f.work);
  std::swap(current_actor_slot(), f.actor);
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, f.stack_size);
  f.ctx = std::move(f.ctx).resume();
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
  std::swap(running_work_slot(), f.work);
  std::swap(current_actor_slot(), f.actor);
  current_ = nullptr;
  if (!f.job && f.ctx)
    idle_.push_back(&f);
  // Work reports its own errors; what escapes it is the runtime's bug,
  // thrown where the driver steps the run rather than lost on a fiber.
  if (f.failure)
    std::rethrow_exception(std::exchange(f.failure, nullptr));
}

void world::run_on(int node, std::function<void()> body) {
  schedule(now_, [this, node, meant = incarnation(node),
                  body = std::move(body)]() mutable {
    if (incarnation(node) != meant)
      return; // its node died before it began
    start_on(node, std::move(body));
  });
}

void world::start_on(int node, std::function<void()> body) {
  auto& f = idle_fiber();
  f.node = node;
  f.typed = 0;
  f.doing = nullptr;
  f.job = std::move(body);
  resume(f);
}

void world::run_beside(std::function<void()> body) {
  // The caller's identity, which its work keeps: what it is doing for a
  // deadlock's message too.
  auto typed = typed_actor();
  auto doing = current_ != nullptr ? current_->doing : nullptr;
  run_on(here(), [this, typed, doing, actor = current_actor_slot(),
                  body = std::move(body)] {
    set_typed_actor(typed);
    current_->doing = doing;
    current_actor_slot() = actor;
    body();
  });
}

uint64_t world::typed_actor() const noexcept {
  return current_ != nullptr ? current_->typed : 0;
}

void world::set_typed_actor(uint64_t id) noexcept {
  if (current_ != nullptr)
    current_->typed = id;
}

void world::park(fiber& f) {
  f.yield();
  f.arrived();
}

} // namespace lumen::detail::sim
