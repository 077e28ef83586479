#pragma once

/// The ML layer: tensors (lumen::ml) and collectives (lumen::collective),
/// with ring peers, their typed actors.

#include "lumen/ml/collective.hpp"
#include "lumen/ml/ring.hpp"
#include "lumen/ml/ring_peer.hpp"
#include "lumen/ml/tensor.hpp"
