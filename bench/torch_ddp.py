#!/usr/bin/env python3
"""PyTorch DDP side of bench/run: the Fashion-MNIST MLP of examples/fashion_mnist_mlp.json trained by
DistributedDataParallel over gloo on loopback, 2 processes (1 thread each), synchronous like tfx's sync mode:
every global step averages the gradients of the workers' batches (batch per worker, default 64). Rank 0
evaluates on the test set every --eval-every steps (the other rank waits at the next all-reduce, as a tfx
worker waits for the master's pull). See torch_fmnist.py for the shared model, data and output lines.

Usage: torch_ddp.py [--workers 2] [--steps 6000] [--batch 64] [--eval-every 250] [--seed 42]
(starts the worker processes itself; --rank is for those)."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import torch_fmnist as fm


def worker(a):
    fm.set_threads(1)
    x, y = fm.load("train")
    tx, ty = fm.load("t10k")
    dist.init_process_group("gloo", rank=a.rank, world_size=a.workers)
    model = DistributedDataParallel(fm.mlp(a.seed))
    opt, sched = fm.adam(model.parameters(), a.steps)
    shard = fm.Shard(x, y, a.rank, a.workers, a.batch, a.seed)
    dist.barrier()
    clock = fm.Clock()
    for step in range(1, a.steps + 1):
        bx, by = shard.next()
        loss = F.cross_entropy(model(bx), by)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if a.rank == 0 and (step % a.eval_every == 0 or step == a.steps):
            clock.evaluate("ddp", step, model.module, tx, ty)
    clock.report("ddp", a.rank, a.steps, a.batch * a.workers)
    dist.destroy_process_group()


def main():
    a = fm.parse_args(__doc__)
    if a.rank >= 0:
        return worker(a)
    fm.launch(__file__, a.workers, "worker")


if __name__ == "__main__":
    main()
