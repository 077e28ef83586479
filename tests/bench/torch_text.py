# PyTorch's run of `lumen train text`'s gpt preset, for the training
# guide's comparison: the same layers (token and position embeddings, 4
# pre-norm blocks of 4-head causal attention and a GELU MLP of 512, 128
# wide, a final norm and head), the same text and split (the files of a
# folder in name order, no symlinks or .dat files; every tenth block of
# 8192 bytes, or of a tenth of the text where that is less, held out for
# validation), windows at random starts, Adam with 100 steps of warm-up
# and a cosine down to a tenth, validation over 384 evenly spaced windows.
#   LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread \
#     /usr/bin/python3 torch_text.py [--data DIR] [--steps N] [--eval-every K]
#       [--batch B] [--length T] [--lr LR] [--threads N]
# (Debian's python3-torch on OpenBLAS, apt-get install python3-torch
# libopenblas0-pthread: on the reference BLAS it runs 8x slower.)
# Prints one line per evaluation: step, validation bits per character,
# characters a second. B is the whole step's windows (lumen's --batch
# times its workers).
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--data", default="/usr/share/games/fortunes")
p.add_argument("--steps", type=int, default=2000)
p.add_argument("--eval-every", type=int, default=200)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--length", type=int, default=64)
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--seed", type=int, default=1)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)


def load(path):
    if not os.path.isdir(path):
        return open(path, "rb").read()
    names = sorted(
        n for n in os.listdir(path)
        if not n.endswith(".dat") and not os.path.islink(os.path.join(path, n))
        and os.path.isfile(os.path.join(path, n)))
    return b"".join(open(os.path.join(path, n), "rb").read() for n in names)


raw = load(a.data)
vocab = sorted(set(raw))
index = {b: i for i, b in enumerate(vocab)}
tokens = torch.tensor([index[b] for b in raw], dtype=torch.long)
block = max(1, min(8192, len(tokens) // 10))
parts = [tokens[i:i + block] for i in range(0, len(tokens), block)]
train = torch.cat([p for b, p in enumerate(parts) if b % 10 != 9])
held = torch.cat([p for b, p in enumerate(parts) if b % 10 == 9])
V, D, T = len(vocab), 128, a.length


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.out = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.up, self.down = nn.Linear(D, 512), nn.Linear(512, D)
        self.register_buffer("later", torch.ones(T, T).triu(1).bool())

    def forward(self, x):
        q, k, v = self.qkv(self.n1(x)).split(D, dim=2)
        heads = lambda t: t.view(t.size(0), T, 4, D // 4).transpose(1, 2)
        # torch 1.13 (Debian 12's) has no scaled_dot_product_attention.
        score = heads(q) @ heads(k).transpose(2, 3) / math.sqrt(D // 4)
        y = score.masked_fill(self.later, float("-inf")).softmax(3) @ heads(v)
        x = x + self.out(y.transpose(1, 2).reshape(x.shape))
        return x + self.down(F.gelu(self.up(self.n2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
        self.blocks = nn.Sequential(*[Block() for _ in range(4)])
        self.norm, self.head = nn.LayerNorm(D), nn.Linear(D, V)

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(T))
        return self.head(self.norm(self.blocks(h)))


model = GPT()
opt = torch.optim.Adam(model.parameters(), lr=a.lr)
gen = torch.Generator().manual_seed(a.seed)


def windows(text, starts):
    x = torch.stack([text[s:s + T] for s in starts])
    y = torch.stack([text[s + 1:s + T + 1] for s in starts])
    return x, y


room = len(held) - T - 2
val_x, val_y = windows(held, [k * room // 383 for k in range(384)])
print(f"torch gpt: {sum(p.numel() for p in model.parameters())} parameters, "
      f"{V} tokens, {a.threads} threads", flush=True)
start = time.perf_counter()
for step in range(a.steps):
    x, y = windows(train,
                   torch.randint(0, len(train) - T - 1, (a.batch,), generator=gen))
    loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
    opt.zero_grad()
    loss.backward()
    scale = ((step + 1) / 100 if step < 100 else
             0.1 + 0.45 * (1 + math.cos(math.pi * step / a.steps)))
    for g in opt.param_groups:
        g["lr"] = a.lr * scale
    opt.step()
    if (step + 1) % a.eval_every == 0 or step + 1 == a.steps:
        took = time.perf_counter() - start
        with torch.no_grad():
            val = F.cross_entropy(model(val_x).reshape(-1, V), val_y.reshape(-1))
        print(f"step {step + 1} val_bpc {val.item() / math.log(2):.3f} "
              f"chars_per_second {(step + 1) * a.batch * T / took:.0f}",
              flush=True)
