#!/usr/bin/env python3
"""Rebuilds a model `lumen train` wrote from its model.safetensors alone,
with numpy and no Lumen, and prints its accuracy on Fashion-MNIST's test
set: what the file's tensors and metadata say is the whole model.

    python3 examples/ml/rebuild_with_numpy.py \\
        ~/lumen_results/fashion_mnist/checkpoint_9/model.safetensors

Needs numpy (apt-get install python3-numpy) and the data set
(apt-get install dataset-fashion-mnist). --limit N tests on the first N
images only (as `lumen train --test-limit N`).
"""
import argparse
import gzip
import json
import math
import re
import struct
import sys
import zlib

import numpy as np


def read_model(path):
    """The file's float32 tensors by name, and its metadata, each tensor
    checked against the CRC-32 Lumen keeps beside it."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    meta = head.pop("__metadata__", {})
    tensors = {}
    for name, entry in head.items():
        begin, end = entry["data_offsets"]
        data = raw[8 + n + begin:8 + n + end]
        kept = meta.get("lumen.crc32." + name)
        if kept is not None and int(kept, 16) != zlib.crc32(data):
            sys.exit(f"{path}: tensor {name} does not match its checksum")
        if entry["dtype"] == "F32":
            tensors[name] = np.frombuffer(data, "<f4").reshape(entry["shape"])
    return tensors, meta


def layers_of(meta):
    """The layers as (name, [arguments], the prefix of its tensors' names):
    an MLP's widths (layers.i for the i-th linear layer), or a sequential
    model's spec, "conv(32,3)-relu-pool(2)-...-linear(10)" (layers.i for
    the spec's i-th layer)."""
    if meta["lumen.model"] != "sequential":
        widths = meta["architecture"].split("-")
        out = []
        for i, width in enumerate(widths[1:]):
            out += [("linear", [int(width)], f"layers.{i}"), ("relu", [], "")]
        return out[:-1]
    out = []
    for i, part in enumerate(meta["architecture"].split("-")):
        name, args = re.fullmatch(r"([a-z]+)(?:\(([\d,]+)\))?", part).groups()
        args = [int(a) for a in args.split(",")] if args else []
        out.append((name, args, f"layers.{i}"))
    return out


# [forward]
def forward(tensors, layers, x):
    """The logits of a batch x (examples x channels x height x width)."""
    erf = np.frompyfunc(math.erf, 1, 1)
    for name, args, prefix in layers:
        w = tensors.get(prefix + ".weight")
        b = tensors.get(prefix + ".bias")
        if name == "conv":  # w: [out channels, in channels, K, K]
            pad = args[2] if len(args) == 3 else 0
            x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
            windows = np.lib.stride_tricks.sliding_window_view(
                x, w.shape[2:], axis=(2, 3))
            x = np.einsum("nchwij,ocij->nohw", windows, w, optimize=True)
            x = x + b[None, :, None, None]
        elif name == "pool":
            k = args[0]
            n, c, h, wd = x.shape
            x = x[:, :, :h // k * k, :wd // k * k]
            x = x.reshape(n, c, h // k, k, wd // k, k).max(axis=(3, 5))
        elif name == "linear":  # w: [inputs, outputs]
            x = x.reshape(len(x), -1) @ w + b
        elif name == "relu":
            x = np.maximum(x, 0)
        elif name == "gelu":
            x = x * 0.5 * (1 + erf(x / math.sqrt(2)).astype(np.float32))
        elif name == "dropout":  # drops in training only
            pass
        elif name == "flatten":
            x = x.reshape(len(x), -1)
        else:
            sys.exit(f"a layer this script does not know: {name}")
    return x
# [/forward]


def idx_file(path, offset):
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a model.safetensors lumen wrote")
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args()

    tensors, meta = read_model(args.model)
    layers = layers_of(meta)
    images = idx_file(f"{args.data}/t10k-images-idx3-ubyte.gz", 16)
    labels = idx_file(f"{args.data}/t10k-labels-idx1-ubyte.gz", 8)
    if args.limit > 0:
        labels = labels[:args.limit]
    shape = [int(s) for s in meta.get("lumen.input", "784x1x1").split("x")]
    x = images[:len(labels) * 784].reshape([len(labels)] + shape)
    # The normalisation the model was trained with, in its metadata.
    x = (x.astype(np.float32) / 255 - float(meta["input_mean"])) / float(
        meta["input_std"])
    right = 0
    for at in range(0, len(x), 500):
        logits = forward(tensors, layers, x[at:at + 500])
        right += int((logits.argmax(1) == labels[at:at + 500]).sum())
    print(f"accuracy {right / len(labels):.4f} on {len(labels)} test images "
          f"({meta['lumen.model']} {meta['architecture']}, "
          f"{meta['epochs_done']} epochs)")


if __name__ == "__main__":
    main()
