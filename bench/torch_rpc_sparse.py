#!/usr/bin/env python3
"""PyTorch RPC parameter server for sparse models, the reference of bench/sparse's cluster lines: the K-class
logistic regression over a LibSVM file's hashed features (a [D, K] table and a bias, zeros at start) held by
1 ps and trained by 2 trainers (torch.distributed.rpc over TensorPipe on loopback, 1 thread each), synchronous
as tfx's sync mode: each step a trainer pulls the rows its batch touches, computes F.embedding_bag on them,
pushes their gradients, and the ps, once both trainers' gradients are in, sums them and applies Adagrad to the
touched rows only (as torch.optim.Adagrad does with sparse gradients). Trainer 1 evaluates on the test file at
the end. One JSON line: examples/s (both trainers), test accuracy, peak RSS of the ps and of a trainer.

    torch_rpc_sparse.py TRAIN TEST --dim D [--epochs 3] [--batch 32] [--lr 0.1] [--port 29533]"""
import argparse, json, os, resource, threading, time
import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn.functional as F

PS = None


def read_libsvm(path):
    ids, vals, offs, labels = [], [], [0], []
    for line in open(path):
        parts = line.split()
        if parts:
            labels.append(int(float(parts[0])))
            for item in parts[1:]:
                k, v = item.split(":")
                ids.append(int(k) - 1), vals.append(float(v))
            offs.append(len(ids))
    return torch.tensor(ids), torch.tensor(vals), torch.tensor(offs), torch.tensor(labels)


class Server:
    """The table, the bias and their Adagrad sums; the step's gradients gathered from both trainers."""

    def __init__(self, dim, classes, lr, workers):
        self.w, self.b = torch.zeros(dim, classes), torch.zeros(classes)
        self.sw, self.sb = torch.zeros(dim, classes), torch.zeros(classes)
        self.lr, self.workers, self.lock = lr, workers, threading.Lock()
        self.grads, self.future = [], torch.futures.Future()

    def rows(self, ids):
        return self.w[ids].clone(), self.b.clone()

    def add(self, ids, g, gb):
        with self.lock:
            self.grads.append((ids, g, gb))
            fut = self.future
            if len(self.grads) == self.workers:
                ids = torch.cat([x[0] for x in self.grads])
                g = torch.cat([x[1] for x in self.grads])
                uniq, inv = torch.unique(ids, return_inverse=True)
                summed = torch.zeros(len(uniq), g.shape[1]).index_add_(0, inv, g)
                gb = sum(x[2] for x in self.grads)
                self.sw[uniq] += summed * summed
                self.w[uniq] -= self.lr * summed / (self.sw[uniq].sqrt() + 1e-10)
                self.sb += gb * gb
                self.b -= self.lr * gb / (self.sb.sqrt() + 1e-10)
                self.grads, self.future = [], torch.futures.Future()
                fut.set_result(True)
            return fut


def rows(ids):
    return PS.rows(ids)


@rpc.functions.async_execution
def push(ids, g, gb):
    return PS.add(ids, g, gb)


def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def batch_of(data, rows_idx):
    ids, vals, offs, labels = data
    starts, ends = offs[rows_idx], offs[rows_idx + 1]
    take = torch.cat([torch.arange(s, e) for s, e in zip(starts.tolist(), ends.tolist())])
    bag = torch.zeros(len(rows_idx), dtype=torch.long)
    bag[1:] = torch.cumsum(ends - starts, 0)[:-1]
    return ids[take], vals[take], bag, labels[rows_idx]


def logits(ids, vals, bag):
    """Pulls the touched rows and combines them: returns the logits, the rows' leaf tensor and the ids."""
    uniq, inv = torch.unique(ids, return_inverse=True)
    w, b = rpc.rpc_sync("ps", rows, args=(uniq,))
    w.requires_grad_(True), b.requires_grad_(True)
    return F.embedding_bag(inv, w, bag, per_sample_weights=vals, mode="sum") + b, w, b, uniq


def trainer(rank, a, out):
    train, test = read_libsvm(a.train), read_libsvm(a.test)
    mine = torch.arange(rank - 1, len(train[3]), a.workers)
    steps = a.epochs * len(mine) // a.batch
    g = torch.Generator().manual_seed(1)  # the same order on both: equal step counts
    start, done = time.perf_counter(), 0
    while done < steps:
        order = mine[torch.randperm(len(mine), generator=g)]
        for s in range(0, len(order) - a.batch + 1, a.batch):
            if done == steps:
                break
            ids, vals, bag, y = batch_of(train, order[s:s + a.batch])
            z, w, b, uniq = logits(ids, vals, bag)
            F.cross_entropy(z, y).backward()
            rpc.rpc_sync("ps", push, args=(uniq, w.grad, b.grad))
            done += 1
    seconds = time.perf_counter() - start
    res = {"examples_per_s": round(a.workers * steps * a.batch / seconds), "trainer_rss_mib": rss_mib()}
    if rank == 1:
        hits = 0
        with torch.no_grad():
            for s in range(0, len(test[3]), 1000):
                ids, vals, bag, y = batch_of(test, torch.arange(s, min(s + 1000, len(test[3]))))
                z, _, _, _ = logits(ids, vals, bag)
                hits += int((z.argmax(1) == y).sum())
        res["test_accuracy"] = round(hits / len(test[3]), 4)
        out.put(res)


def run(rank, a, out):
    global PS
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=8, rpc_timeout=600)
    if rank == 0:
        classes = int(max(read_libsvm(a.train)[3].max(), read_libsvm(a.test)[3].max())) + 1
        PS = Server(a.dim, classes, a.lr, a.workers)
    rpc.init_rpc("ps" if rank == 0 else f"trainer{rank}", rank=rank, world_size=a.workers + 1,
                 rpc_backend_options=opts)
    if rank > 0:
        trainer(rank, a, out)
    rpc.shutdown()
    if rank == 0:
        out.put({"ps_rss_mib": rss_mib()})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train"); ap.add_argument("test"); ap.add_argument("--dim", type=int, required=True)
    ap.add_argument("--epochs", type=int, default=3); ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.1); ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--port", type=int, default=29533)
    a = ap.parse_args()
    out = mp.get_context("spawn").SimpleQueue()
    mp.spawn(run, args=(a, out), nprocs=a.workers + 1, join=True)
    res = {}
    while not out.empty():
        res.update(out.get())
    print(json.dumps(res))


if __name__ == "__main__":
    main()
