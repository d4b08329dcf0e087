"""What bench/torch_ddp.py and bench/torch_rpc_ps.py share with tfx's examples/fashion_mnist_mlp.json: the
Fashion-MNIST IDX files (Debian's dataset-fashion-mnist), pixels scaled by 1/255, the 784-256-128-10 ReLU MLP
with Glorot-uniform kernels and zero biases, Adam (beta1 0.9, beta2 0.999, epsilon 1e-7) at 0.001 with the
cosine schedule over max_steps, a worker's shard = the records i % n_workers == rank, reshuffled each epoch,
and the evaluation rule: accuracy on the whole test set every `eval_every` global steps and at the end.

Each process prints `key=value` lines that bench/run parses:
  eval system=S step=N time_s=T accuracy=A          (time_s: since the first step, when the result is known)
  train system=S rank=R steps=N step_ms=M ex_s=X    (step_ms: mean training step, evaluation pauses excluded)
"""
import argparse
import ctypes
import ctypes.util
import gzip
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch
from torch import nn

DATA = "/usr/share/datasets/fashion-mnist"


def openblas_threads(n):
    """Sets OpenBLAS's own thread count (torch.set_num_threads does not reach it on Debian's build)."""
    for name in ("libopenblas.so.0", ctypes.util.find_library("openblas")):
        try:
            ctypes.CDLL(name).openblas_set_num_threads(ctypes.c_int(n))
            return
        except (OSError, TypeError, AttributeError):
            continue


def set_threads(n):
    """One process, n threads: PyTorch's OpenMP pool and OpenBLAS, as tfx's training.threads."""
    torch.set_num_threads(n)
    openblas_threads(n)


def read_idx(path):
    """The array in an IDX file (gzip), as numpy; raises ValueError naming the file when it is malformed."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 8:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {body.size} bytes of data for dims {dims}")
    return body.reshape(dims)


def load(split):
    """(x float32 [N, 784] in [0, 1], y int64 [N]) of split 'train' or 't10k'."""
    x = read_idx(f"{DATA}/{split}-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0
    y = read_idx(f"{DATA}/{split}-labels-idx1-ubyte.gz").astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def mlp(seed):
    """The 784-256-128-10 ReLU MLP, Glorot-uniform kernels, zero biases."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    for m in model:
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def adam(params, max_steps, lr=0.001):
    """Adam with tfx's defaults and its cosine schedule (lr * 0.5 * (1 + cos(pi * min(step / max_steps, 1))))."""
    opt = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999), eps=1e-7)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1.0 + math.cos(math.pi * min(s / max_steps, 1.0))))
    return opt, sched


class Shard:
    """Batches of one worker's records (i % n == rank), reshuffled every epoch from a fixed seed."""

    def __init__(self, x, y, rank, n, batch, seed):
        self.x, self.y = x[rank::n], y[rank::n]
        self.batch, self.gen, self.pos = batch, torch.Generator().manual_seed(seed + rank), len(self.y)

    def next(self):
        if self.pos + self.batch > len(self.y):
            self.perm, self.pos = torch.randperm(len(self.y), generator=self.gen), 0
        idx = self.perm[self.pos : self.pos + self.batch]
        self.pos += self.batch
        return self.x[idx], self.y[idx]


@torch.no_grad()
def accuracy(model, x, y):
    """Top-1 accuracy on (x, y), in batches of 1000."""
    hits = 0
    for i in range(0, len(y), 1000):
        hits += (model(x[i : i + 1000]).argmax(1) == y[i : i + 1000]).sum().item()
    return hits / len(y)


class Clock:
    """Training time since the first step and the share of it spent evaluating (excluded from step_ms)."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.eval_s = 0.0

    def since_start(self):
        return time.perf_counter() - self.t0

    def evaluate(self, system, step, model, x, y):
        t = time.perf_counter()
        acc = accuracy(model, x, y)
        self.eval_s += time.perf_counter() - t
        print(f"eval system={system} step={step} time_s={self.since_start():.3f} accuracy={acc:.4f}", flush=True)
        return acc

    def report(self, system, rank, steps, examples_per_step):
        train_s = self.since_start() - self.eval_s
        step_ms = 1000 * train_s / max(steps, 1)
        print(f"train system={system} rank={rank} steps={steps} step_ms={step_ms:.4f} "
              f"ex_s={examples_per_step * steps / max(train_s, 1e-9):.1f}", flush=True)


def free_port():
    """A port the kernel picks on loopback."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environ_for_children(port):
    """The environment of the processes a bench script starts: loopback rendezvous, one thread each."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    env.setdefault("TP_SOCKET_IFNAME", "lo")
    return env


def parse_args(doc):
    """The options every bench script takes (--rank >= 0 marks a process the script started itself)."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=6000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--rank", type=int, default=-1)
    return p.parse_args()


def launch(script, n, what):
    """Starts `script` again as ranks 0..n-1 on a loopback rendezvous and waits; exits naming failed codes."""
    env = environ_for_children(free_port())
    args = [sys.executable, script] + sys.argv[1:]
    procs = [subprocess.Popen(args + ["--rank", str(r)], env=env) for r in range(n)]
    codes = [q.wait() for q in procs]
    if any(codes):
        sys.exit(f"{os.path.basename(script)[:-3]}: {what} exit codes {codes}")
