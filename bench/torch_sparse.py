#!/usr/bin/env python3
"""PyTorch's side of bench/sparse: the K-class logistic regression over a LibSVM file's hashed features as PyTorch
users write it, torch.nn.EmbeddingBag(D, K, mode="sum", sparse=True) weighted by the file's values, plus a bias,
trained by torch.optim.Adagrad (sparse gradients for the table) at the batch and thread count given, weights
starting at zero as tfx's linear bag does; then test accuracy. One JSON line: examples/s over the training
epochs, test accuracy, peak RSS.

    torch_sparse.py TRAIN TEST --dim D [--epochs 3] [--batch 32] [--lr 0.1] [--threads 1]"""
import argparse, json, resource, time
import torch


def read_libsvm(path):
    """CSR of a LibSVM file: 0-based ids, values, row offsets, labels."""
    ids, vals, offs, labels = [], [], [0], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            labels.append(int(float(parts[0])))
            for item in parts[1:]:
                k, v = item.split(":")
                ids.append(int(k) - 1)
                vals.append(float(v))
            offs.append(len(ids))
    return (torch.tensor(ids, dtype=torch.long), torch.tensor(vals), torch.tensor(offs, dtype=torch.long),
            torch.tensor(labels, dtype=torch.long))


def minibatches(data, rows):
    """The rows' ids, values and bag offsets, as EmbeddingBag takes them."""
    ids, vals, offs, labels = data
    starts, ends = offs[rows], offs[rows + 1]
    take = torch.cat([torch.arange(s, e) for s, e in zip(starts.tolist(), ends.tolist())])
    lengths = ends - starts
    bag_offsets = torch.zeros(len(rows), dtype=torch.long)
    bag_offsets[1:] = torch.cumsum(lengths, 0)[:-1]
    return ids[take], vals[take], bag_offsets, labels[rows]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train"); ap.add_argument("test"); ap.add_argument("--dim", type=int, required=True)
    ap.add_argument("--epochs", type=int, default=3); ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.1); ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    train, test = read_libsvm(a.train), read_libsvm(a.test)
    classes = int(max(train[3].max(), test[3].max())) + 1
    table = torch.nn.EmbeddingBag(a.dim, classes, mode="sum", sparse=True)
    torch.nn.init.zeros_(table.weight)
    bias = torch.nn.Parameter(torch.zeros(classes))
    opt = torch.optim.Adagrad([table.weight, bias], lr=a.lr)
    n = len(train[3])
    start = time.perf_counter()
    for _ in range(a.epochs):
        order = torch.randperm(n)
        for s in range(0, n, a.batch):
            ids, vals, offsets, y = minibatches(train, order[s:s + a.batch])
            opt.zero_grad()
            logits = table(ids, offsets, per_sample_weights=vals) + bias
            torch.nn.functional.cross_entropy(logits, y).backward()
            opt.step()
    seconds = time.perf_counter() - start
    hits = 0
    with torch.no_grad():
        for s in range(0, len(test[3]), 1000):
            ids, vals, offsets, y = minibatches(test, torch.arange(s, min(s + 1000, len(test[3]))))
            hits += int(((table(ids, offsets, per_sample_weights=vals) + bias).argmax(1) == y).sum())
    print(json.dumps({"examples_per_s": round(a.epochs * n / seconds), "train_s": round(seconds, 2),
                      "test_accuracy": round(hits / len(test[3]), 4),
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))


if __name__ == "__main__":
    main()
