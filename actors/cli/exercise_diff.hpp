#pragma once

// Where a learner's run first leaves the reference's: both programs'
// --step=json lines (a step's state, or an event of a simulated run and
// the state the part shows beside it), compared line by line, so that a
// failing check can point at the first message, event or value that went
// otherwise ("event 41 at 12.300 ms: version is 4 in yours, 3 in the
// reference's").

#include <string>

namespace lumen::cli {

/// The first line at which `yours` differs from `reference` (each a
/// program's output; lines that are not JSON objects are left out), said
/// for the learner with both lines; "" if they agree. Identifiers that
/// only count (an event's "seq" and "work") are not compared.
std::string first_difference(const std::string& yours,
                             const std::string& reference);

} // namespace lumen::cli
