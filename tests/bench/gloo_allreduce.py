# For compare_allreduce.sh only: torch.distributed.all_reduce (float sum)
# over gloo, N processes on loopback, on the sizes allreduce_bench uses; one
# JSON line per N and size in allreduce_bench's fields.
#   python3 gloo_allreduce.py REPS BYTES...
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def member(rank, n, reps, sizes, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    for size in sizes:
        t = torch.ones(size // 4)
        iters = max(3, min(2000, (256 << 20) // size))
        dist.all_reduce(t)  # warm
        bw, t_min = [], float("inf")
        for _ in range(reps):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(t)
            took = torch.tensor([(time.perf_counter() - t0) / iters])
            dist.all_reduce(took, op=dist.ReduceOp.MAX)
            took = took.item()
            bw.append(size / took * 2 * (n - 1) / n / 1e9)
            t_min = min(t_min, took)
        bw.sort()
        median = bw[len(bw) // 2] if len(bw) % 2 else (bw[len(bw) // 2 - 1] + bw[len(bw) // 2]) / 2
        if rank == 0:
            out.put(json.dumps({"bench": "compare_allreduce", "name": "torch_gloo",
                                "unit": "GB/s", "min": bw[0], "median": median,
                                "n": n, "bytes": size, "t_min_us": t_min * 1e6,
                                "algorithm": "torch.distributed.all_reduce (gloo)"}))
    dist.destroy_process_group()


if __name__ == "__main__":
    reps, sizes = int(sys.argv[1]), [int(s) for s in sys.argv[2:]]
    ctx = mp.get_context("spawn")
    for n in (2, 3, 4):
        out = ctx.Queue()
        procs = [ctx.Process(target=member, args=(r, n, reps, sizes, 29500 + n, out))
                 for r in range(n)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        while not out.empty():
            print(out.get())
