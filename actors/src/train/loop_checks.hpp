#pragma once

// What every train loop of `lumen train` checks at each step, and how its
// commands write numbers and times.

#include <string>
#include <vector>

namespace lumen::train::detail {

/// A step whose loss or mean gradient is not finite ends the run (every
/// step after it would train on NaN), naming `where` ("epoch 1, step 6 of
/// 32"), what is not finite and the fix. The gradient is the same on
/// every rank, so all stop at the same step.
void stop_if_diverged(float loss, const std::vector<float>& grad,
                      const std::string& where);

/// `seconds` as minutes and seconds ("41:07"), for times left.
std::string clock_text(double seconds);

/// `x` as the shortest text that reads back as it (0.03, not 0.030000).
std::string number_text(double x);

} // namespace lumen::train::detail
