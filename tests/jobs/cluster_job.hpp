#pragma once

// The remote functions and actors of the cluster tests (cluster_job.cpp).

#include <memory>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/deserializer.hpp>
#include <caf/replies_to.hpp>
#include <caf/serializer.hpp>
#include <caf/typed_actor.hpp>

std::string where();
int add(int x, int y);
double sum(const std::vector<float>& xs);
int fails(int x);
int busy(int ms);
// Sleeps `ms` milliseconds; returns when it started and ended on the
// machine's monotonic clock (ns, comparable across its processes).
std::vector<int64_t> busy_span(int ms);
std::string busy_on(const std::string& victim);
double relay(const std::string& to, int n);
int hold_channel(const std::string& name);
// Sends to the channel listener `name` as fast as the link takes for `ms`
// milliseconds; returns the bytes sent.
double pour(const std::string& name, int ms);
std::string kv_read(const std::string& key);
bool kv_claim(const std::string& key, const std::string& value);

class Counter {
public:
  explicit Counter(int start);
  int add(int d);
  std::string node() const;
  int nap(int ms);
  // nap, returning when it began and ended, as busy_span.
  std::vector<int64_t> nap_span(int ms);
  int fail();
  std::string self_id() const;

private:
  int n_;
};

// Typed CAF actors, registered by name with LUMEN_TYPED_ACTOR.
using add_atom = caf::atom_constant<caf::atom("add")>;
using ask_atom = caf::atom_constant<caf::atom("ask")>;

using calculator =
  caf::typed_actor<caf::replies_to<add_atom, int32_t, int32_t>::with<int32_t>>;

// Adds up what it is sent and answers the sum so far: the answers show the
// order the requests arrived in.
using tally =
  caf::typed_actor<caf::replies_to<add_atom, int32_t>::with<int64_t>>;

// A byte block that a process receiving it from another reads in place
// where it can (lumen::view_received_bytes), remembering whether it did.
struct byte_block {
  std::vector<char> own;             // the bytes, unless viewed
  const char* viewed = nullptr;      // or where they are in a frame,
  size_t viewed_size = 0;            // how many,
  std::shared_ptr<const void> frame; // and what keeps them alive
  const char* data() const {
    return viewed != nullptr ? viewed : own.data();
  }
  size_t size() const {
    return viewed != nullptr ? viewed_size : own.size();
  }
};

caf::error inspect(caf::serializer& f, byte_block& x);
caf::error inspect(caf::deserializer& f, byte_block& x);

using echo_atom = caf::atom_constant<caf::atom("echo")>;

// Sends two blocks back as it got them, and whether it got each in place.
using block_echo = caf::typed_actor<caf::replies_to<
  echo_atom, byte_block, byte_block>::with<byte_block, byte_block, bool, bool>>;

// Answers the size of the block it is sent. The request carries a handle
// too, so it goes through CAF's control link whatever its size.
using bulk_sink = caf::typed_actor<
  caf::replies_to<echo_atom, calculator, byte_block>::with<uint64_t>>;

// Never answers: its requests stay open until it or its node is gone.
using silent_actor = caf::typed_actor<caf::replies_to<ask_atom>::with<int32_t>>;

// Asks the calculator or the silent actor it is given: the request carries
// an actor handle, and the relay_actor's own request goes from its node to
// the other actor's.
using relay_actor = caf::typed_actor<
  caf::replies_to<add_atom, calculator, int32_t, int32_t>::with<int32_t>,
  caf::replies_to<ask_atom, silent_actor>::with<int32_t>>;
