#include "collective/local_group.hpp"

#include "collective/threads/threads_transport.hpp"

namespace lumen::collective::detail {

local_group::local_group(std::string name, int world)
  : name_(std::move(name))
  , world_(world)
  , joined_(static_cast<size_t>(world), false)
  , left_(static_cast<size_t>(world), false)
  , arrived_(static_cast<size_t>(world), false)
  , slots_(static_cast<size_t>(world))
  , rounds_(static_cast<size_t>(world))
  , staging_(static_cast<size_t>(2 * world))
  , quick_slots_{std::vector<slot>(static_cast<size_t>(world)),
                 std::vector<slot>(static_cast<size_t>(world))}
  , hub_(std::make_unique<threads_hub>(name_, world, timeout_)) {}

local_group::~local_group() = default;

std::string local_group::verdict_of(const std::vector<slot>& slots,
                                    const slot_check& check, errc& code) {
  code = errc::mismatch;
  auto why = check(slots);
  if (why.empty()) {
    code = errc::usage;
    why = root_out_of_range(slots);
  }
  for (size_t r = 0; r < slots.size() && why.empty(); ++r)
    why = slots[r].problem;
  return why;
}

namespace {

// quick_'s word: the round above, then whether it is closed, then the
// members counted in.
constexpr int quick_round_shift = 16;
constexpr uint64_t quick_closed = uint64_t{1} << 15;
constexpr uint64_t quick_members = quick_closed - 1;

uint64_t quick_round(uint64_t word) noexcept {
  return word >> quick_round_shift;
}

} // namespace

void local_group::close_quick(uint64_t round) noexcept {
  auto w = quick_.load();
  // Nobody can be counted in a later round, nor all members in this one:
  // this member is not.
  while (quick_round(w) < round ||
         (quick_round(w) == round && !(w & quick_closed))) {
    auto in = quick_round(w) == round ? w & quick_members : 0;
    if (quick_.compare_exchange_weak(w, (round << quick_round_shift) |
                                          quick_closed | in))
      return;
  }
}

bool local_group::start_quickly(int rank, slot& mine, const slot_check& check) {
  auto me = static_cast<size_t>(rank);
  auto round = rounds_[me].begun;
  auto world = static_cast<uint64_t>(world_);
  if (world > quick_members || broken_seen_.load() || left_count_.load() > 0)
    return false;
  auto& slots = quick_slots_[round & 1];
  slots[me] = std::move(mine);
  auto w = quick_.load(std::memory_order_acquire);
  for (;;) {
    bool now = quick_round(w) == round;
    if (now && (w & quick_closed)) {
      mine = std::move(slots[me]);
      return false;
    }
    auto in = now ? (w & quick_members) + 1 : 1;
    // Release: the slot and the staged copy go with the count; the last
    // one's acquire sees every member's (a release sequence).
    if (quick_.compare_exchange_weak(w, (round << quick_round_shift) | in,
                                     std::memory_order_acq_rel,
                                     std::memory_order_acquire))
      break;
  }
  // All in; or a later round counted, which needs this one done.
  auto all_in = [&](uint64_t v) {
    return quick_round(v) > round ||
           (quick_round(v) == round && !(v & quick_closed) &&
            (v & quick_members) == world);
  };
  auto settled = [&] {
    w = quick_.load(std::memory_order_acquire);
    return all_in(w) || (w & quick_closed) || broken_seen_.load() ||
           left_count_.load() > 0;
  };
  // As arrive's spin: a few microseconds on the core, then yielding it.
  auto now = clock::now();
  if (!util::spin_until(settled, now + std::chrono::microseconds(5)))
    util::spin_until(settled, now + std::chrono::microseconds(50),
                     util::poll_pause::yield);
  // Late, closed, or broken: counted out again, the round closed, unless
  // the last member came meanwhile.
  while (!all_in(w)) {
    auto out = (w & ~quick_members) | quick_closed | ((w & quick_members) - 1);
    if (quick_.compare_exchange_weak(w, out, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      mine = std::move(slots[me]);
      return false;
    }
  }
  ++rounds_[me].begun;
  errc code = errc::mismatch;
  auto why = verdict_of(slots, check, code);
  if (!why.empty())
    throw collective_error("group '" + name_ + "': " + why, code);
  return true;
}

void local_group::set_timeout(std::chrono::milliseconds t) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    timeout_ = t;
  }
  hub_->set_timeout(t);
}

} // namespace lumen::collective::detail
