#pragma once

/// The ML layer: tensors, data, models, optimizers, gradient compression,
/// the parameter server and data-parallel workers (lumen::ml), and
/// collectives (lumen::collective) with ring peers, their typed actors.

#include "lumen/collective.hpp"
#include "lumen/ml/batch_stream.hpp"
#include "lumen/ml/broadcast.hpp"
#include "lumen/ml/codec.hpp"
#include "lumen/ml/compress.hpp"
#include "lumen/ml/data.hpp"
#include "lumen/ml/data_parallel_worker.hpp"
#include "lumen/ml/model_file.hpp"
#include "lumen/ml/models.hpp"
#include "lumen/ml/optimizer.hpp"
#include "lumen/ml/parameter_server.hpp"
#include "lumen/ml/plot.hpp"
#include "lumen/ml/ps_core.hpp"
#include "lumen/ml/safetensors.hpp"
#include "lumen/ml/sharded_server.hpp"
#include "lumen/ml/tensor.hpp"
