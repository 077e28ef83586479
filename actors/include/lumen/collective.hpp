#pragma once

// lumen::collective: groups of members that all-reduce, broadcast, gather
// and exchange buffers, like ray.util.collective; ring peers, its members
// as typed CAF actors; the ring's schedule.

#include "lumen/collective/collective.hpp"
#include "lumen/collective/ring.hpp"
#include "lumen/collective/ring_peer.hpp"
