#include "collective/net/net_group.hpp"

#include <cstring>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "collective/recorder.hpp"

namespace lumen::collective::detail {

namespace {

using clock = std::chrono::steady_clock;

/// What a member of a power-of-two group tells its partner in a round of
/// agreeing on an operation (net_group::agree_by_doubling).
struct agreement {
  op_descriptor mine; // the sender's own (its data's length)
  int32_t rep = -1;   // the lowest rank of the members it heard of,
  op_descriptor drep; // and its descriptor, which they all share unless
  int32_t bad = 0;    // some of them disagree:
  int32_t a = -1;     // the lowest such pair, b's descriptor
  int32_t b = -1;     // against a's
  op_descriptor da{};
  op_descriptor db{};
};

/// What two members say to each other once their channel is open.
struct hello {
  uint32_t magic = 0x4c4c4548; // "HELL"
  int32_t world = 0;
  int32_t from = 0;
  int32_t to = 0;
};

std::string endpoint(const std::string& group, int rank) {
  return "lumen.collective/" + group + "/" + std::to_string(rank);
}

std::chrono::milliseconds left_until(clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - clock::now()));
}

} // namespace

net_group::net_group(std::string name, int world, int rank,
                     std::chrono::milliseconds timeout) {
  auto prefix = "group '" + name + "': ";
  try {
    listener_ = lumen::listen(endpoint(name, rank));
  } catch (const lumen::usage_error& e) {
    if (e.code() != lumen::errc::name_taken)
      throw;
    throw collective_error(prefix + "rank " + std::to_string(rank) +
                             " is taken: two members claim it; give each "
                             "member its own rank",
                           errc::mismatch);
  }
  auto deadline = clock::now() + timeout;
  std::vector<lumen::channel> peers(static_cast<size_t>(world));
  hello mine;
  mine.world = world;
  mine.from = rank;
  auto check = [&](const hello& theirs, int expected_from) {
    if (theirs.magic != mine.magic)
      throw collective_error(prefix +
                               "a peer that is not a member of a "
                               "Lumen group connected to rank " +
                               std::to_string(rank),
                             errc::mismatch);
    if (theirs.world != world)
      throw collective_error(prefix + "rank " + std::to_string(theirs.from) +
                               " says the group has " +
                               std::to_string(theirs.world) +
                               " members, rank " + std::to_string(rank) +
                               " says " + std::to_string(world) +
                               "; every member must pass the same world_size",
                             errc::mismatch);
    if (theirs.to != rank || theirs.from < 0 || theirs.from >= world ||
        (expected_from >= 0 && theirs.from != expected_from) ||
        peers[static_cast<size_t>(theirs.from)])
      throw collective_error(prefix + "rank " + std::to_string(theirs.from) +
                               " connected twice to rank " +
                               std::to_string(rank) +
                               ": two members claim one rank",
                             errc::mismatch);
  };
  try {
    // Lower ranks first: rank 0 only accepts, and each rank accepts once
    // it reached every rank below it, so nobody waits in a circle.
    for (int q = 0; q < rank; ++q) {
      for (;;) {
        auto c = lumen::connect(endpoint(name, q), left_until(deadline));
        c.set_timeout(left_until(deadline));
        mine.to = q;
        hello theirs;
        try {
          c.send(&mine, sizeof(mine));
          c.recv(&theirs, sizeof(theirs));
        } catch (const lumen::channel_error& e) {
          // A member that made the group again at once can reach rank q's
          // listener of the group before, which closes as q leaves it:
          // q's new listener comes soon.
          if (e.code() != lumen::errc::channel_closed ||
              clock::now() >= deadline)
            throw;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          continue;
        }
        check(theirs, q);
        peers[static_cast<size_t>(q)] = std::move(c);
        break;
      }
    }
    for (int i = rank + 1; i < world; ++i) {
      auto c = listener_.accept(left_until(deadline));
      c.set_timeout(left_until(deadline));
      hello theirs;
      c.recv(&theirs, sizeof(theirs));
      mine.to = theirs.from;
      c.send(&mine, sizeof(mine));
      check(theirs, -1);
      peers[static_cast<size_t>(theirs.from)] = std::move(c);
    }
  } catch (const lumen::channel_error& e) {
    std::string missing;
    for (int q = 0; q < world; ++q)
      if (q != rank && !peers[static_cast<size_t>(q)])
        missing += (missing.empty() ? "" : ", ") + std::to_string(q);
    throw collective_error(prefix + "rank " + std::to_string(rank) +
                             " waited " + std::to_string(timeout.count()) +
                             " ms for rank(s) " + missing +
                             ", which did not come (" + e.what() +
                             "); start every member, each with its own rank",
                           errc::timeout);
  }
  links_ =
    std::make_unique<net_links>(name, world, rank, std::move(peers), timeout);
}

void net_group::start(op_descriptor mine, bool same_op,
                      const std::string& problem, const void* payload,
                      size_t payload_bytes) {
  if (agrees_by_doubling())
    return agree_by_doubling(mine, same_op, problem);
  stamp(mine);
  mine.invalid = problem.empty() ? 0 : 1;
  mine.inline_bytes = payload != nullptr ? payload_bytes : 0;
  // The descriptor and the payload leave in one write.
  agree_all_to_all(
    *this, mine, same_op, problem, [&](int p, const op_descriptor& d) {
      if (payload != nullptr)
        links_->post_head_and_data(p, frame_kind::op, &d, sizeof(d), payload,
                                   payload_bytes);
      else
        links_->post_copy(p, frame_kind::op, &d, sizeof(d));
    });
}

void net_group::agree_by_doubling(op_descriptor mine, bool same_op,
                                  const std::string& problem,
                                  const doubling_data* data) {
  stamp(mine);
  mine.invalid = problem.empty() ? 0 : 1;
  auto doing = to_string(static_cast<operation_kind>(mine.what));
  agreement known;
  // Keeps the lowest disagreeing pair: b's descriptor against a's.
  auto note = [&](int a, const op_descriptor& da, int b,
                  const op_descriptor& db) {
    if (known.bad && std::make_pair(known.a, known.b) <= std::make_pair(a, b))
      return;
    known.bad = 1;
    known.a = a;
    known.b = b;
    known.da = da;
    known.db = db;
  };
  int r = rank();
  known.rep = r;
  known.drep = mine;
  for (int d = 1; d < world(); d *= 2) {
    int p = r ^ d;
    std::pair<const char*, size_t> out{nullptr, 0};
    if (data)
      out = data->send();
    mine.inline_bytes = out.second;
    known.mine = mine;
    links_->post_head_and_data(p, frame_kind::agree, &known, sizeof(known),
                               out.first, out.second);
    agreement theirs;
    links_->read_head(p, frame_kind::agree, &theirs, sizeof(theirs), doing);
    // Both halves agreed within: they agree together if their lowest
    // ranks do. Every member of both halves compares the same two, so all
    // of them note the same pair.
    bool both_agreed = !known.bad && !theirs.bad;
    if (theirs.bad)
      note(theirs.a, theirs.da, theirs.b, theirs.db);
    bool mine_lower = known.rep < theirs.rep;
    int lo = mine_lower ? known.rep : theirs.rep;
    int hi = mine_lower ? theirs.rep : known.rep;
    auto dlo = mine_lower ? known.drep : theirs.drep;
    auto dhi = mine_lower ? theirs.drep : known.drep;
    // The pair's subject: the member that refused its own input, else
    // the higher rank.
    if (both_agreed && dlo.invalid && !dhi.invalid)
      note(hi, dhi, lo, dlo);
    else if (both_agreed && !disagreement(dhi, hi, dlo, lo, same_op).empty())
      note(lo, dlo, hi, dhi);
    known.rep = lo;
    known.drep = dlo;
    links_->flush(); // what we sent may change now
    // The partner's data is read whatever this member does with it, so
    // that the channel stays in step when the two called different
    // operations.
    if (data)
      data->take(p, theirs.mine.inline_bytes, !known.bad);
    else if (auto bytes = theirs.mine.inline_bytes; bytes > 0)
      links_->read_data(p, scratch(0, bytes).data(), bytes, doing);
  }
  if (!known.bad)
    return;
  throw collective_error(
    "group '" + name() + "': " +
      (problem.empty()
         ? disagreement(known.db, known.b, known.da, known.a, same_op)
         : problem),
    problem.empty() ? errc::mismatch : errc::usage);
}

host_segment* net_group::segment() {
  if (!segment_tried_) {
    segment_tried_ = true;
    segment_ = host_segment::open(*links_);
  }
  return segment_.get();
}

net_group::~net_group() {
  if (!service_)
    return;
  if (auto since = links_->broken_at())
    std::this_thread::sleep_until(*since + records_wait);
}

void net_group::record_as(std::shared_ptr<flight_recorder> r) {
  transport::record_as(r);
  if (!r)
    return;
  try {
    service_ = std::make_unique<records_service>(r, name(), rank(), world());
  } catch (const lumen::error& e) {
    // The group works without it; only the records stay here.
    std::cerr << "lumen: group '" << name() << "': rank " << rank()
              << " cannot serve its flight records: " << e.what() << "\n";
  }
  links_->on_stall(
    [this, r](const std::string& why, int gone) -> std::string {
      // The group's own failure is what the members must hear, whatever
      // befalls the gathering.
      try {
        auto members = fetch_peers(name(), world(), rank(), gone, records_wait);
        members.push_back(member_records(*r));
        return report_stall(name(), world(), why, members);
      } catch (const std::exception& e) {
        return std::string{"; the flight records could not be gathered ("} +
               e.what() + ")";
      }
    },
    r);
}

} // namespace lumen::collective::detail
