#pragma once

/// Data-parallel training (lumen::train): gradient buckets, and a
/// replica's bucketed all-reduce overlapped with its backward pass.

#include "lumen/train/buckets.hpp"
#include "lumen/train/data_parallel.hpp"
#include "lumen/train/fashion_mnist.hpp"
#include "lumen/train/trainer.hpp"
