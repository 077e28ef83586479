# For trainer_bench only: PyTorch on the model, data and schedule of
# `lumen train fashion-mnist` (MLP 784-256-128-10 or its --model cnn,
# standardized inputs,
# momentum SGD 0.9 with weight decay, cosine decay per step), on one
# thread, or DistributedDataParallel over gloo with 2 processes of one
# thread each, BATCH rows a step in all (BATCH/2 a process with DDP).
# Prints one JSON object: each epoch's training seconds and test accuracy.
#   python3 torch_fashion_mnist.py single|ddp EPOCHS LIMIT TEST_LIMIT LR WD BATCH mlp|cnn
import gzip
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def idx(name):
    with gzip.open(os.path.join(DATA, name)) as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(split, limit):
    prefix = "train" if split == "train" else "t10k"
    x = idx(prefix + "-images-idx3-ubyte.gz").reshape(-1, 784)
    y = idx(prefix + "-labels-idx1-ubyte.gz")
    if limit:
        x, y = x[:limit], y[:limit]
    x = (torch.from_numpy(x.astype(np.float32)) / 255 - MEAN) / STD
    return x, torch.from_numpy(y.astype(np.int64))


def model(kind):
    torch.manual_seed(1)
    nn = torch.nn
    if kind == "cnn":  # lumen::train::fashion_mnist_cnn
        return nn.Sequential(nn.Unflatten(1, (1, 28, 28)),
                             nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
                             nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
                             nn.Linear(3136, 128), nn.ReLU(), nn.Dropout(0.25),
                             nn.Linear(128, 10))
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(),
                         nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def train(rank, world, epochs, limit, test_limit, lr, wd, batch, kind, port, out):
    torch.set_num_threads(1)
    if world > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    x, y = load("train", limit)
    each = len(x) // world
    x, y = x[rank * each:(rank + 1) * each], y[rank * each:(rank + 1) * each]
    tx, ty = load("test", test_limit)
    net = model(kind)
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=wd)
    steps = (len(x) + batch - 1) // batch
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / (epochs * steps))))
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(1 + rank)
    seconds, accuracy = [], []
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=gen)
        start = time.perf_counter()
        net.train()
        for s in range(steps):
            rows = order[s * batch:(s + 1) * batch]
            opt.zero_grad()
            loss_fn(net(x[rows]), y[rows]).backward()
            opt.step()
            sched.step()
        seconds.append(time.perf_counter() - start)
        net.eval()
        with torch.no_grad():
            accuracy.append((net(tx).argmax(1) == ty).float().mean().item())
    if rank == 0:
        out.put({"seconds": seconds, "accuracy": accuracy,
                 "threads": torch.get_num_threads(),
                 "blas": torch.__config__.show().count("BLAS")})


def main():
    mode, epochs, limit, test_limit = sys.argv[1], *map(int, sys.argv[2:5])
    lr, wd = float(sys.argv[5]), float(sys.argv[6])
    world = 2 if mode == "ddp" else 1
    batch = int(sys.argv[7]) // world
    kind = sys.argv[8]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    if world == 1:
        train(0, 1, epochs, limit, test_limit, lr, wd, batch, kind, port, out)
    else:
        mp.spawn(train,
                 args=(world, epochs, limit, test_limit, lr, wd, batch, kind, port,
                       out),
                 nprocs=world)
    print(json.dumps(out.get()))


if __name__ == "__main__":
    main()
