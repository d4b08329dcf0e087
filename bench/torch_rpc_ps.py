#!/usr/bin/env python3
"""PyTorch RPC parameter-server side of bench/run: the Fashion-MNIST MLP of examples/fashion_mnist_mlp.json on
1 ps + 2 trainers (torch.distributed.rpc, TensorPipe on loopback, 1 thread each), synchronous like tfx's sync
mode and with tfx's one-round-trip exchange: a trainer sends its gradients to the ps and gets the updated
values in the reply; the ps answers every trainer once all gradients of the step are in, averaged, and
applied (Adam on the ps, as tfx's ps holds the optimizer slots). Trainer 0 evaluates on the test set every
--eval-every steps. See torch_fmnist.py for the shared model, data and output lines.

Usage: torch_rpc_ps.py [--workers 2] [--steps 6000] [--batch 64] [--eval-every 250] [--seed 42]
(starts the processes itself; --rank 0 is the ps, 1..workers the trainers)."""
import threading

import torch
import torch.distributed.rpc as rpc
import torch.nn.functional as F

import torch_fmnist as fm

PS = None  # the ps process's state


class Server:
    """The model and optimizer of the ps, and the step being gathered."""

    def __init__(self, workers, steps, seed):
        self.model = fm.mlp(seed)
        self.params = list(self.model.parameters())
        self.opt, self.sched = fm.adam(self.params, steps)
        for p in self.params:
            p.grad = torch.zeros_like(p)
        self.workers, self.pending, self.lock = workers, 0, threading.Lock()
        self.future = torch.futures.Future()

    def values(self):
        return [p.detach().clone() for p in self.params]

    def add(self, grads):
        """Adds one trainer's gradients; the last of a step applies them and answers every trainer."""
        with self.lock:
            for p, g in zip(self.params, grads):
                p.grad += g
            self.pending += 1
            fut = self.future
            if self.pending == self.workers:
                for p in self.params:
                    p.grad /= self.workers
                self.opt.step()
                self.sched.step()
                for p in self.params:
                    p.grad.zero_()
                self.pending, self.future = 0, torch.futures.Future()
                fut.set_result(self.values())
            return fut


def pull():
    return PS.values()


@rpc.functions.async_execution
def push_pull(grads):
    return PS.add(grads)


def trainer(a, index):
    x, y = fm.load("train")
    tx, ty = fm.load("t10k")
    model = fm.mlp(a.seed)
    params = list(model.parameters())
    shard = fm.Shard(x, y, index, a.workers, a.batch, a.seed)

    def assign(values):
        with torch.no_grad():
            for p, v in zip(params, values):
                p.copy_(v)

    assign(rpc.rpc_sync("ps", pull))
    clock = fm.Clock()
    for step in range(1, a.steps + 1):
        bx, by = shard.next()
        for p in params:
            p.grad = None
        F.cross_entropy(model(bx), by).backward()
        assign(rpc.rpc_sync("ps", push_pull, args=([p.grad for p in params],)))
        if index == 0 and (step % a.eval_every == 0 or step == a.steps):
            clock.evaluate("rpc_ps", step, model, tx, ty)
    clock.report("rpc_ps", index, a.steps, a.batch * a.workers)


def run(a):
    global PS
    fm.set_threads(1)
    name = "ps" if a.rank == 0 else f"trainer{a.rank - 1}"
    if a.rank == 0:
        PS = Server(a.workers, a.steps, a.seed)
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=4, rpc_timeout=120)
    rpc.init_rpc(name, rank=a.rank, world_size=a.workers + 1, rpc_backend_options=opts)
    if a.rank > 0:
        trainer(a, a.rank - 1)
    rpc.shutdown()


def main():
    a = fm.parse_args(__doc__)
    if a.rank >= 0:
        return run(a)
    fm.launch(__file__, a.workers + 1, "process")


if __name__ == "__main__":
    main()
