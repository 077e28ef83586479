#include "lumen/ml/collective.hpp"

#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace lumen::collective {

namespace {

using clock = std::chrono::steady_clock;

/// What one member brings to an operation.
struct slot {
  const void* in = nullptr; // the member's input (a tensor, a list, ...)
  char* data = nullptr;     // its buffer, for the in-place collectives
  ml::dtype type = ml::dtype::float32;
  size_t numel = 0;
  std::vector<int64_t> shape;
  reduce_op op = reduce_op::sum;
  bool has_root = false;
  int root = 0;
  std::string what; // the operation, as the member called it
};

/// The members of one group in this process, and the operation under way.
/// An operation goes in rounds: every member posts its slot and waits for
/// the others (the last one checks that the slots agree), then each stage
/// of work ends with every member waiting for the others again.
class local_group {
public:
  local_group(std::string name, int world)
    : name_(std::move(name))
    , world_(world)
    , joined_(static_cast<size_t>(world), false)
    , arrived_(static_cast<size_t>(world), false)
    , slots_(static_cast<size_t>(world)) {}

  const std::string& name() const noexcept {
    return name_;
  }

  int world() const noexcept {
    return world_;
  }

  /// Claims `rank`; false if it is taken.
  bool join(int rank) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (joined_[static_cast<size_t>(rank)])
      return false;
    joined_[static_cast<size_t>(rank)] = true;
    ++members_;
    return true;
  }

  /// Gives `rank` up; true if it was the last member.
  bool leave(int rank) {
    std::lock_guard<std::mutex> guard{mtx_};
    joined_[static_cast<size_t>(rank)] = false;
    if (count_ > 0)
      break_with("rank " + std::to_string(rank) +
                 " left the group (destroy_group) while the others waited");
    return --members_ == 0;
  }

  void set_timeout(std::chrono::milliseconds t) {
    std::lock_guard<std::mutex> guard{mtx_};
    timeout_ = t;
  }

  /// Runs one operation for `rank`: posts `mine`, checks all slots with
  /// `check` (an empty answer means they agree), then runs each stage,
  /// all members finishing a stage before any starts the next.
  void run(
    int rank, slot mine,
    const std::function<std::string(const std::vector<slot>&)>& check,
    const std::vector<std::function<void(const std::vector<slot>&)>>& stages) {
    {
      std::unique_lock<std::mutex> lock{mtx_};
      slots_[static_cast<size_t>(rank)] = std::move(mine);
      arrive(lock, rank, "start " + slots_[static_cast<size_t>(rank)].what,
             [&] { return check(slots_); });
      if (!verdict_.empty())
        throw collective_error("group '" + name_ + "': " + verdict_);
    }
    for (auto& stage : stages) {
      stage(slots_);
      std::unique_lock<std::mutex> lock{mtx_};
      arrive(lock, rank, "finish a step of " + slots_[rank].what, nullptr);
    }
  }

private:
  /// Waits for every member to arrive here; the last runs `last` and wakes
  /// the rest. Throws once the group is broken.
  void arrive(std::unique_lock<std::mutex>& lock, int rank,
              const std::string& where,
              const std::function<std::string()>& last) {
    if (!broken_.empty())
      throw collective_error(broken_);
    auto generation = generation_;
    arrived_[static_cast<size_t>(rank)] = true;
    if (++count_ == world_) {
      verdict_ = last ? last() : std::string{};
      count_ = 0;
      std::fill(arrived_.begin(), arrived_.end(), false);
      ++generation_;
      cv_.notify_all();
      return;
    }
    auto deadline = clock::now() + timeout_;
    bool woke = cv_.wait_until(lock, deadline, [&] {
      return generation_ != generation || !broken_.empty();
    });
    if (!woke) {
      std::string missing;
      for (size_t r = 0; r < arrived_.size(); ++r)
        if (!arrived_[r])
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      break_with("rank " + std::to_string(rank) + " waited " +
                 std::to_string(timeout_.count()) + " ms to " + where +
                 " for rank(s) " + missing +
                 ", which did not come; destroy the group and make it again");
    }
    if (!broken_.empty())
      throw collective_error(broken_);
  }

  void break_with(const std::string& why) {
    broken_ = "group '" + name_ + "': " + why;
    cv_.notify_all();
  }

  std::string name_;
  int world_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<bool> joined_;
  int members_ = 0;
  std::chrono::milliseconds timeout_{30000};
  // The round under way.
  uint64_t generation_ = 0;
  int count_ = 0;
  std::vector<bool> arrived_;
  std::vector<slot> slots_;
  std::string verdict_;
  std::string broken_; // set for good once a member failed to come
};

struct group_registry {
  std::mutex mtx;
  std::map<std::string, std::shared_ptr<local_group>> groups;
};

group_registry& registry() {
  static group_registry r;
  return r;
}

struct membership {
  std::shared_ptr<local_group> group;
  int rank;
};

/// The groups the calling thread is a member of.
std::map<std::string, membership>& my_groups() {
  thread_local std::map<std::string, membership> mine;
  return mine;
}

membership& member_of(const std::string& group) {
  auto& mine = my_groups();
  auto i = mine.find(group);
  if (i == mine.end())
    throw collective_error("this thread is not a member of group '" + group +
                           "'; call lumen::collective::init_group(world_size, "
                           "rank, \"" +
                           group + "\") on it first");
  return i->second;
}

/// Dispatches on a dtype to `fn(T{})`.
template <class F>
void with_type(ml::dtype t, F&& fn) {
  switch (t) {
    case ml::dtype::float32:
      return fn(float{});
    case ml::dtype::float64:
      return fn(double{});
    case ml::dtype::int32:
      return fn(int32_t{});
    case ml::dtype::int64:
      return fn(int64_t{});
  }
}

std::string describe(const slot& s) {
  return std::to_string(s.numel) + " " + ml::to_string(s.type);
}

/// The slots disagree on dtype, length or op: who and how.
std::string check_same(const std::vector<slot>& slots, bool same_op) {
  for (size_t r = 1; r < slots.size(); ++r) {
    if (slots[r].what != slots[0].what)
      return "rank " + std::to_string(r) + " called " + slots[r].what +
             " while rank 0 called " + slots[0].what +
             "; every rank must call the same collective in the same order";
    if (slots[r].type != slots[0].type || slots[r].numel != slots[0].numel)
      return "rank " + std::to_string(r) + " passed " + describe(slots[r]) +
             " elements, rank 0 passed " + describe(slots[0]) +
             "; every rank must pass the same dtype and length";
    if (same_op && slots[r].op != slots[0].op)
      return "rank " + std::to_string(r) + " asked for " +
             to_string(slots[r].op) + ", rank 0 for " + to_string(slots[0].op);
    if (slots[r].root != slots[0].root)
      return "rank " + std::to_string(r) + " named rank " +
             std::to_string(slots[r].root) + " as the root, rank 0 named " +
             std::to_string(slots[0].root);
  }
  auto world = static_cast<int>(slots.size());
  if (slots[0].has_root && (slots[0].root < 0 || slots[0].root >= world))
    return slots[0].what + " names rank " + std::to_string(slots[0].root) +
           ", which is out of range: the group has ranks 0 to " +
           std::to_string(world - 1);
  return {};
}

slot slot_of(const ml::tensor& t, std::string what) {
  slot s;
  s.type = t.type();
  s.numel = t.numel();
  s.shape = t.shape();
  s.what = std::move(what);
  return s;
}

/// A member's buffer, for the in-place collectives.
slot slot_of(char* data, ml::dtype type, size_t numel, std::string what) {
  slot s;
  s.data = data;
  s.type = type;
  s.numel = numel;
  s.shape = {static_cast<int64_t>(numel)};
  s.what = std::move(what);
  return s;
}

template <class T>
T* elems(const slot& s) {
  return reinterpret_cast<T*>(s.data);
}

const ml::tensor& tensor_in(const slot& s) {
  return *static_cast<const ml::tensor*>(s.in);
}

} // namespace

void set_timeout(const std::string& group, std::chrono::milliseconds timeout) {
  member_of(group).group->set_timeout(timeout);
}

void init_group(int world_size, int rank, const std::string& group) {
  if (world_size < 1)
    throw collective_error("group '" + group + "' needs at least one member (" +
                           "world_size " + std::to_string(world_size) + ")");
  if (rank < 0 || rank >= world_size)
    throw collective_error(
      "rank " + std::to_string(rank) + " is out of range for group '" + group +
      "' of " + std::to_string(world_size) + " members (ranks 0 to " +
      std::to_string(world_size - 1) + ")");
  if (my_groups().count(group))
    throw collective_error("this thread is a member of group '" + group +
                           "' already (rank " +
                           std::to_string(my_groups()[group].rank) +
                           "); destroy_group first to join again");
  std::shared_ptr<local_group> g;
  {
    auto& reg = registry();
    std::lock_guard<std::mutex> guard{reg.mtx};
    auto& slot = reg.groups[group];
    if (!slot)
      slot = std::make_shared<local_group>(group, world_size);
    g = slot;
  }
  if (g->world() != world_size)
    throw collective_error(
      "group '" + group + "' has " + std::to_string(g->world()) +
      " members, and this one says " + std::to_string(world_size) +
      "; every member must pass the same world_size");
  if (!g->join(rank))
    throw collective_error("rank " + std::to_string(rank) + " of group '" +
                           group +
                           "' is taken: two members claim it; give each "
                           "member its own rank");
  my_groups()[group] = {g, rank};
}

void destroy_group(const std::string& group) {
  auto m = member_of(group);
  my_groups().erase(group);
  if (m.group->leave(m.rank)) {
    auto& reg = registry();
    std::lock_guard<std::mutex> guard{reg.mtx};
    auto i = reg.groups.find(group);
    if (i != reg.groups.end() && i->second == m.group)
      reg.groups.erase(i);
  }
}

bool is_group_initialized(const std::string& group) {
  return my_groups().count(group) > 0;
}

int get_rank(const std::string& group) {
  return member_of(group).rank;
}

int get_world_size(const std::string& group) {
  return member_of(group).group->world();
}

namespace {

void allreduce_in_place(char* data, ml::dtype type, size_t numel,
                        const std::string& group, reduce_op op) {
  auto& m = member_of(group);
  auto s = slot_of(data, type, numel, "allreduce");
  s.op = op;
  auto rank = static_cast<size_t>(m.rank);
  auto world = static_cast<size_t>(m.group->world());
  // Each rank reduces its own slice over every member's buffer, into its
  // own buffer (nobody else reads that slice of it), then copies the
  // others' finished slices.
  auto reduce_mine = [&](const std::vector<slot>& all) {
    with_type(type, [&](auto t) {
      using T = decltype(t);
      auto c = chunk_of(numel, world, rank);
      T* acc = elems<T>(all[rank]) + c.begin;
      for (size_t q = 0; q < world; ++q)
        if (q != rank)
          reduce_into(acc, elems<T>(all[q]) + c.begin, c.size(), op);
      finish(acc, c.size(), op, world);
    });
  };
  auto gather_others = [&](const std::vector<slot>& all) {
    auto elem = ml::size_of(type);
    for (size_t q = 0; q < world; ++q) {
      auto c = chunk_of(numel, world, q);
      if (q != rank && c.size() > 0)
        std::memcpy(data + c.begin * elem, all[q].data + c.begin * elem,
                    c.size() * elem);
    }
  };
  m.group->run(
    m.rank, std::move(s),
    [](const std::vector<slot>& all) { return check_same(all, true); },
    {reduce_mine, gather_others});
}

void reduce_in_place(char* data, ml::dtype type, size_t numel, int dst_rank,
                     const std::string& group, reduce_op op) {
  auto& m = member_of(group);
  auto s = slot_of(data, type, numel, "reduce");
  s.op = op;
  s.has_root = true;
  s.root = dst_rank;
  auto rank = static_cast<size_t>(m.rank);
  auto world = static_cast<size_t>(m.group->world());
  // Rank r reduces slice r of every buffer and writes it into the
  // destination's: only rank r touches slice r anywhere.
  auto reduce_mine = [&](const std::vector<slot>& all) {
    with_type(type, [&](auto t) {
      using T = decltype(t);
      auto c = chunk_of(numel, world, rank);
      std::vector<T> acc(elems<T>(all[0]) + c.begin, elems<T>(all[0]) + c.end);
      for (size_t q = 1; q < world; ++q)
        reduce_into(acc.data(), elems<T>(all[q]) + c.begin, c.size(), op);
      finish(acc.data(), c.size(), op, world);
      std::copy(acc.begin(), acc.end(),
                elems<T>(all[static_cast<size_t>(dst_rank)]) + c.begin);
    });
  };
  m.group->run(
    m.rank, std::move(s),
    [](const std::vector<slot>& all) { return check_same(all, true); },
    {reduce_mine});
}

void broadcast_in_place(char* data, ml::dtype type, size_t numel, int src_rank,
                        const std::string& group) {
  auto& m = member_of(group);
  auto s = slot_of(data, type, numel, "broadcast");
  s.has_root = true;
  s.root = src_rank;
  auto copy = [&](const std::vector<slot>& all) {
    if (m.rank != src_rank && numel > 0)
      std::memcpy(data, all[static_cast<size_t>(src_rank)].data,
                  numel * ml::size_of(type));
  };
  m.group->run(
    m.rank, std::move(s),
    [](const std::vector<slot>& all) { return check_same(all, false); },
    {copy});
}

} // namespace

void allreduce(ml::tensor& buf, const std::string& group, reduce_op op) {
  allreduce_in_place(buf.raw(), buf.type(), buf.numel(), group, op);
}

void allreduce(std::vector<float>& buf, const std::string& group,
               reduce_op op) {
  allreduce_in_place(reinterpret_cast<char*>(buf.data()), ml::dtype::float32,
                     buf.size(), group, op);
}

void reduce(ml::tensor& buf, int dst_rank, const std::string& group,
            reduce_op op) {
  reduce_in_place(buf.raw(), buf.type(), buf.numel(), dst_rank, group, op);
}

void broadcast(ml::tensor& buf, int src_rank, const std::string& group) {
  broadcast_in_place(buf.raw(), buf.type(), buf.numel(), src_rank, group);
}

void broadcast(std::vector<float>& buf, int src_rank,
               const std::string& group) {
  broadcast_in_place(reinterpret_cast<char*>(buf.data()), ml::dtype::float32,
                     buf.size(), src_rank, group);
}

void allgather(std::vector<ml::tensor>& out, const ml::tensor& in,
               const std::string& group) {
  auto& m = member_of(group);
  auto s = slot_of(in, "allgather");
  s.in = &in;
  auto gather = [&](const std::vector<slot>& all) {
    out.clear();
    for (auto& q : all)
      out.push_back(tensor_in(q).clone());
  };
  m.group->run(m.rank, std::move(s),
               [](const std::vector<slot>& all) {
                 for (size_t r = 1; r < all.size(); ++r)
                   if (all[r].shape != all[0].shape)
                     return "rank " + std::to_string(r) + " passed a " +
                            tensor_in(all[r]).describe() + ", rank 0 a " +
                            tensor_in(all[0]).describe() +
                            "; allgather needs the same shape everywhere";
                 return check_same(all, false);
               },
               {gather});
}

void reducescatter(ml::tensor& out, const std::vector<ml::tensor>& in,
                   const std::string& group, reduce_op op) {
  auto& m = member_of(group);
  auto world = static_cast<size_t>(m.group->world());
  auto rank = static_cast<size_t>(m.rank);
  slot s;
  s.what = "reducescatter";
  s.in = &in;
  s.numel = in.size();
  s.op = op;
  auto list = [](const slot& x) -> const std::vector<ml::tensor>& {
    return *static_cast<const std::vector<ml::tensor>*>(x.in);
  };
  auto mine = [&](const std::vector<slot>& all) {
    out = list(all[0])[rank].clone();
    with_type(out.type(), [&](auto t) {
      using T = decltype(t);
      for (size_t q = 1; q < world; ++q)
        reduce_into(out.data<T>(), list(all[q])[rank].data<T>(), out.numel(),
                    op);
      finish(out.data<T>(), out.numel(), op, world);
    });
  };
  auto check = [world, list](const std::vector<slot>& all) -> std::string {
    for (size_t q = 0; q < all.size(); ++q)
      if (all[q].what != "reducescatter" || all[q].numel != world)
        return "rank " + std::to_string(q) + " called " + all[q].what +
               " with " + std::to_string(all[q].numel) +
               " tensors; reducescatter takes one tensor per rank (" +
               std::to_string(world) + ") on every rank";
    for (size_t r = 0; r < world; ++r)
      for (size_t q = 1; q < all.size(); ++q) {
        auto& a = list(all[0])[r];
        auto& b = list(all[q])[r];
        if (a.type() != b.type() || a.shape() != b.shape())
          return "tensor " + std::to_string(r) + " of rank " +
                 std::to_string(q) + " is a " + b.describe() +
                 ", of rank 0 a " + a.describe() +
                 "; every rank must pass the same shapes";
      }
    for (size_t q = 1; q < all.size(); ++q)
      if (all[q].op != all[0].op)
        return "rank " + std::to_string(q) + " asked for " +
               to_string(all[q].op) + ", rank 0 for " + to_string(all[0].op);
    return {};
  };
  m.group->run(m.rank, std::move(s), check, {mine});
}

void barrier(const std::string& group) {
  auto& m = member_of(group);
  slot s;
  s.what = "barrier";
  m.group->run(
    m.rank, std::move(s),
    [](const std::vector<slot>& all) { return check_same(all, false); }, {});
}

} // namespace lumen::collective
