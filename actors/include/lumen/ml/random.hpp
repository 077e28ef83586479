#pragma once

// Draws from a seed that are the same on every standard library (unlike
// std::normal_distribution's), so that a seeded data set or simulation
// is the same everywhere.

#include <random>

namespace lumen::ml {

/// N(0, 1) by Box-Muller over the generator's top 53 bits, two draws in
/// this order on every compiler.
float standard_normal(std::mt19937_64& gen);

} // namespace lumen::ml
