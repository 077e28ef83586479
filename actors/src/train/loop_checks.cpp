#include "train/loop_checks.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "lumen/errors.hpp"
#include "lumen/ml/data.hpp"

namespace lumen::train::detail {

void stop_if_diverged(float loss, const std::vector<float>& grad,
                      const std::string& where) {
  auto bad = ml::first_non_finite(grad.data(), grad.size());
  if (std::isfinite(loss) && bad == grad.size())
    return;
  std::string what = std::isfinite(loss)
                       ? "gradient element " + std::to_string(bad) + " is " +
                           number_text(grad[bad])
                       : "loss is " + number_text(loss);
  throw error("training diverged at " + where + ": the " + what +
              "; lower the learning rate (--lr)");
}

std::string clock_text(double seconds) {
  auto s = long(seconds + 0.5);
  char out[32];
  std::snprintf(out, sizeof out, "%ld:%02ld", s / 60, s % 60);
  return out;
}

std::string number_text(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

} // namespace lumen::train::detail
