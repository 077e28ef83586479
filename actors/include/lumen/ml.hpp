#pragma once

/// The ML layer: tensors (lumen::ml) and collectives (lumen::collective).

#include "lumen/ml/collective.hpp"
#include "lumen/ml/ring.hpp"
#include "lumen/ml/tensor.hpp"
