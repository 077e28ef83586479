#pragma once

/// The ML layer: tensors, data and models (lumen::ml), and collectives
/// (lumen::collective) with ring peers, their typed actors.

#include "lumen/ml/collective.hpp"
#include "lumen/ml/data.hpp"
#include "lumen/ml/models.hpp"
#include "lumen/ml/ring.hpp"
#include "lumen/ml/ring_peer.hpp"
#include "lumen/ml/tensor.hpp"
