#!/usr/bin/python3
"""bench/torch_recsys.py EXPERIMENT [--workers N] [--epochs E]: the PyTorch twin of a tfx recommendation model.

EXPERIMENT is the tfx experiment file itself (examples/criteo_*.json, examples/debian_two_tower.json, as bench/recsys
rewrites them): the twin builds the same graph from its model.layers, layer by layer, with the same widths,
initializers (glorot_uniform kernels, zero biases, uniform:S tables; tfx's own defaults where the file names none),
optimizer (Adagrad with tfx's epsilon and a zero accumulator; Adam with its betas and epsilon, the tables' rows by
SparseAdam, lazily as the ps applies rows), loss (the batch mean), batch size, epochs and seed-shuffled order, on one
thread. The layers: embedding_bag (a table per column, nn.Embedding(sparse=True) summed per example, combiners
sum, mean, sqrtn and sequence; a bag naming another's table reads that one), dense, concat, add, batch_norm (eps 1e-3, moving averages at 0.99), cross (DCN-v2, full or low rank),
dot_interaction (the upper triangle of the inputs' pairwise dots), target_attention (tfx's bilinear form: masked
softmax of h_i . tW / sqrt(k), output [p, p * tW]), and the graph ops matmul and bias_add on model.variables.

The data are read as tfx reads them (model.features): a hash column's value (or each value of a bag split at its
separator, the first max_len kept) to a bucket (zlib's crc32 here, XXH3 in tfx: another hash, the same buckets),
an empty cell to an empty bag; a numeric column through log1p (sign kept), empty as 0. The whole set is parsed
before training, and examples/s counts only the training loop (tfx's, from its train records, also excludes
loading). With --workers N > 1 the twin is N processes under DistributedDataParallel over gloo on loopback, each
with the experiment's batch on its own 1/N of every epoch, the gradients averaged every step (tfx's sync mode).

Prints one JSON line: auc and log_loss (sigmoid models), recall_10, recall_50 and baseline_recall_50 (softmax
models over more than 100 classes), examples_per_s, train_s, peak_rss_mib (the largest process), steps.
"""
import argparse, array, csv, json, math, os, resource, socket, subprocess, sys, time, zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

csv.field_size_limit(1 << 24)


def parse_args():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("experiment")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=0, help="0: the experiment's training.epochs")
    ap.add_argument("--rank", type=int, default=-1)
    return ap.parse_args()


# ---------------------------------------------------------------------------------------------------- the data
class Column:
    """One categorical column as a padded [n, width] id matrix (the pad is the table's last row, bucket) and each
    row's count."""

    def __init__(self, spec):
        self.spec, self.sep, self.max_len = spec, spec.get("separator"), spec.get("max_len", 0)
        self.bucket = spec["hash_bucket_size"]
        self.ids, self.lens, self.cache = array.array("q"), array.array("q"), {}

    def add(self, cell):
        toks = [t for t in cell.split(self.sep) if t] if self.sep else ([cell] if cell else [])
        if self.max_len:
            toks = toks[:self.max_len]
        for t in toks:
            h = self.cache.get(t)
            if h is None:
                h = self.cache[t] = zlib.crc32(t.encode()) % self.bucket
            self.ids.append(h)
        self.lens.append(len(toks))

    def finish(self, width=None):
        lens = np.frombuffer(self.lens, np.int64)
        ids = np.frombuffer(self.ids, np.int64)
        self.width = width or max(1, self.max_len or int(lens.max(initial=1)))
        mat = np.full((len(lens), self.width), self.bucket, np.int64)
        pos = np.arange(len(ids)) - np.repeat(np.cumsum(lens) - lens, lens)
        row = np.repeat(np.arange(len(lens)), lens)
        keep = pos < self.width
        mat[row[keep], pos[keep]] = ids[keep]
        self.mat, self.count = torch.from_numpy(mat), torch.from_numpy(np.minimum(lens, self.width))
        self.ids = self.lens = self.cache = None


def load(exp, path, widths=None):
    """(label tensor, {column: Column}, dense [n, d] tensor) of a CSV through exp's features."""
    feats = exp["model"]["features"]
    label = exp["data"].get("label_column", "label")
    cols = {f["key"]: Column(f) for f in feats if f["type"] == "hash"}
    nums = [f for f in feats if f["type"] == "numeric"]
    y, dense = array.array("q"), array.array("f")
    with open(path, newline="") as fh:
        r = csv.reader(fh)
        head = {h: i for i, h in enumerate(next(r))}
        ci = [(head[k], c) for k, c in cols.items()]
        ni = [(head[f["key"]], f.get("normalizer", "") == "log1p") for f in nums]
        li = head[label]
        for row in r:
            y.append(int(row[li]))
            for i, c in ci:
                c.add(row[i])
            for i, log in ni:
                v = float(row[i]) if row[i] else 0.0
                dense.append(math.copysign(math.log1p(abs(v)), v) if log else v)
    for k, c in cols.items():
        c.finish(widths[k] if widths else None)
    d = torch.from_numpy(np.frombuffer(dense, np.float32).copy()).reshape(len(y), len(nums))
    return torch.from_numpy(np.frombuffer(y, np.int64).copy()), cols, d


# ---------------------------------------------------------------------------------------------------- the model
def init_(t, spec, fan_in, fan_out):
    """Fills t as tfx's initializer spec would (its distribution; torch's generator)."""
    name, _, arg = spec.partition(":")
    with torch.no_grad():
        if name in ("zeros", "ones", "constant"):
            t.fill_({"zeros": 0.0, "ones": 1.0}.get(name, float(arg or 0)))
        elif name == "uniform":
            t.uniform_(-float(arg or 0.05), float(arg or 0.05))
        elif name == "normal":
            t.normal_(0, float(arg or 0.05))
        elif name == "glorot_uniform":
            s = math.sqrt(6.0 / (fan_in + fan_out))
            t.uniform_(-s, s)
        elif name == "he_uniform":
            s = math.sqrt(6.0 / fan_in)
            t.uniform_(-s, s)
        else:
            raise SystemExit(f"torch_recsys: initializer {spec} not in the twin")


class Vars(nn.Module):
    """The graph's variables by tfx name ("items", "cross0/kernel"): a ParameterDict under prefixed keys, since a
    name may be one of the dict's own attributes."""

    def __init__(self):
        super().__init__()
        self.p = nn.ParameterDict()

    def __setitem__(self, k, v):
        self.p["v_" + k] = v

    def __getitem__(self, k):
        return self.p["v_" + k]

    def __contains__(self, k):
        return "v_" + k in self.p


ACT = {"none": lambda x: x, "relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}


class Twin(nn.Module):
    """The experiment's layer graph; forward(cols, dense) returns the last layer's output."""

    def __init__(self, exp, cols, n_dense):
        super().__init__()
        self.plan, self.tables, self.mods, self.owner = [], nn.ModuleDict(), nn.ModuleDict(), {}
        self.vars = Vars()
        for v in exp["model"].get("variables", []):
            p = nn.Parameter(torch.empty(v["shape"]))
            init_(p, v.get("initializer") or ("glorot_uniform" if len(v["shape"]) == 2 else "zeros"),
                  v["shape"][0], v["shape"][-1])
            self.vars[v["name"]] = p
        width, prev, layers = {"input": n_dense}, "input", exp["model"]["layers"]
        for i, l in enumerate(layers):
            name, kind = l.get("name", f"{l['type']}_{i}"), l["type"]
            ins = l.get("inputs", prev).split(",")
            width[name] = self.build(name, kind, l, ins, width, cols, last=i == len(layers) - 1)
            self.plan.append((name, kind, ins, l))
            prev = name

    def build(self, name, kind, l, ins, width, cols, last):
        units = l.get("units", 0)
        if kind == "embedding_bag":
            c = cols[ins[0]]
            seq = l.get("combiner") == "sequence"
            if l.get("table"):                                                  # another bag's table, one id space
                self.owner[name] = self.owner.get(l["table"], l["table"])
            else:
                t = nn.Embedding(c.bucket + 1, units, padding_idx=c.bucket, sparse=True)
                init_(t.weight, l.get("initializer") or ("zeros" if last else "uniform:0.05"), c.bucket, units)
                with torch.no_grad():
                    t.weight[c.bucket].zero_()
                self.tables[name] = t
            if l.get("use_bias", True) and not seq:
                self.vars[name + "/bias"] = nn.Parameter(torch.zeros(units))
            return units * (c.width if seq else 1)
        if kind == "dense":
            d = nn.Linear(width[ins[0]], units)
            init_(d.weight, l.get("initializer") or "glorot_uniform", width[ins[0]], units)
            nn.init.zeros_(d.bias)
            self.mods[name] = d
            return units
        if kind == "concat":
            return sum(width[i] for i in ins)
        if kind in ("add", "activation"):
            return width[ins[0]]
        if kind == "batch_norm":
            self.mods[name] = nn.BatchNorm1d(width[ins[0]], eps=1e-3, momentum=0.01)
            return width[ins[0]]
        if kind == "cross":
            d, r = width[ins[0]], l.get("rank", 0)
            spec = l.get("initializer") or "glorot_uniform"
            self.vars[name + "/kernel"] = nn.Parameter(torch.empty(d, r or d))
            init_(self.vars[name + "/kernel"], spec, d, r or d)
            if r:
                self.vars[name + "/kernel_u"] = nn.Parameter(torch.empty(r, d))
                init_(self.vars[name + "/kernel_u"], spec, r, d)
            self.vars[name + "/bias"] = nn.Parameter(torch.zeros(d))
            return d
        if kind == "dot_interaction":
            n = len(ins)
            self.register_buffer(name.replace(".", "_") + "_iu", torch.triu_indices(n, n, 1))
            return n * (n - 1) // 2
        if kind == "target_attention":
            k = width[ins[1]]
            self.vars[name + "/kernel"] = nn.Parameter(torch.empty(k, k))
            init_(self.vars[name + "/kernel"], "glorot_uniform", k, k)
            return 2 * k
        if kind == "matmul":
            return self.vars[l["variable"]].shape[-1]
        if kind == "bias_add":
            return width[ins[0]]
        raise SystemExit(f"torch_recsys: layer type {kind} not in the twin")

    def bag(self, name, l, c, cols):
        col = cols[c]
        ids, n = col["mat"], col["count"]
        rows = self.tables[self.owner.get(name, name)](ids)                    # [b, w, k], pads zero
        comb = l.get("combiner", "sum")
        if comb == "sequence":
            return rows.reshape(rows.shape[0], -1)
        s = rows.sum(1)
        if comb == "mean":
            s = s / n.clamp(min=1).unsqueeze(1)
        elif comb == "sqrtn":
            s = s / n.clamp(min=1).float().sqrt().unsqueeze(1)
        b = self.vars[name + "/bias"] if name + "/bias" in self.vars else None
        return s + b if b is not None else s

    def forward(self, cols, dense):
        out = {"input": dense}
        for name, kind, ins, l in self.plan:
            x = [out.get(i) for i in ins]
            if kind == "embedding_bag":
                y = self.bag(name, l, ins[0], cols)
            elif kind == "dense":
                y = ACT[l.get("activation", "none")](self.mods[name](x[0]))
            elif kind == "concat":
                y = torch.cat(x, 1)
            elif kind == "add":
                y = x[0]
                for z in x[1:]:
                    y = y + z
            elif kind == "batch_norm":
                y = self.mods[name](x[0])
            elif kind == "cross":
                x0, xl = x[0], x[-1]
                w = self.vars[name + "/kernel"]
                u = xl @ w @ self.vars[name + "/kernel_u"] if name + "/kernel_u" in self.vars else xl @ w
                y = x0 * (u + self.vars[name + "/bias"]) + xl
            elif kind == "dot_interaction":
                z = torch.stack(x, 1)
                iu = getattr(self, name.replace(".", "_") + "_iu")
                y = torch.bmm(z, z.transpose(1, 2))[:, iu[0], iu[1]]
            elif kind == "target_attention":
                y = self.attend(x[0], x[1], cols[self.source(ins[0])]["count"], name)
            elif kind == "matmul":
                y = ACT[l.get("activation", "none")](x[0] @ self.vars[l["variable"]])
            elif kind == "bias_add":
                y = ACT[l.get("activation", "none")](x[0] + self.vars[l["variable"]])
            out[name] = y
        return out[self.plan[-1][0]]

    def source(self, bag):
        return next(ins[0] for name, _, ins, _ in self.plan if name == bag)

    def attend(self, h, t, n, name):
        k = t.shape[1]
        h = h.reshape(h.shape[0], -1, k)
        q = t @ self.vars[name + "/kernel"]
        s = torch.bmm(h, q.unsqueeze(2)).squeeze(2) / math.sqrt(k)
        mask = torch.arange(h.shape[1]).unsqueeze(0) < n.unsqueeze(1)
        a = torch.softmax(s.masked_fill(~mask, -1e30), 1) * mask             # an empty history: zeros
        p = torch.bmm(a.unsqueeze(1), h).squeeze(1)
        return torch.cat([p, p * q], 1)


# ---------------------------------------------------------------------------------------------------- training
def optimizers(exp, model):
    o = exp["optimizer"]
    lr, eps = o["learning_rate"], o.get("epsilon", 1e-7)
    sparse = [t.weight for t in model.tables.values()]
    ids = {id(p) for p in sparse}
    dense = [p for p in model.parameters() if id(p) not in ids]
    if o["name"] == "adagrad":
        return [torch.optim.Adagrad(sparse + dense, lr=lr, eps=eps)]
    if o["name"] == "adam":
        betas = (o.get("beta1", 0.9), o.get("beta2", 0.999))
        return [torch.optim.SparseAdam(sparse, lr=lr, betas=betas, eps=eps),
                torch.optim.Adam(dense, lr=lr, betas=betas, eps=eps)]
    raise SystemExit(f"torch_recsys: optimizer {o['name']} not in the twin")


def batch_of(cols, dense, idx):
    return {k: {"mat": c.mat[idx], "count": c.count[idx]} for k, c in cols.items()}, dense[idx]


def auc_of(p, y):
    order = np.argsort(p, kind="mergesort")
    ranks = np.empty(len(p))
    sp = p[order]
    i = 0
    while i < len(sp):                                                          # tied scores share their mean rank
        j = i
        while j + 1 < len(sp) and sp[j + 1] == sp[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = y == 1
    npos, nneg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def evaluate(exp, model, test, train_y):
    """The eval record's metrics, scored 4096 examples at a time (a softmax keeps each chunk's top 50 only)."""
    y, cols, dense = test
    sigmoid = exp["model"]["loss"] == "sigmoid_cross_entropy"
    model.eval()
    outs, ce = [], 0.0
    with torch.no_grad():
        for s in range(0, len(y), 4096):
            idx = torch.arange(s, min(s + 4096, len(y)))
            z = model(*batch_of(cols, dense, idx))
            if sigmoid:
                outs.append(z.reshape(-1))
            else:
                ce += F.cross_entropy(z, y[idx], reduction="sum").item()
                outs.append(torch.topk(z, 50, 1).indices)
    model.train()
    if sigmoid:
        z = torch.cat(outs)
        ll = F.binary_cross_entropy_with_logits(z, y.float()).item()
        return {"auc": round(auc_of(z.numpy().astype(np.float64), y.numpy()), 5), "log_loss": round(ll, 5)}
    hit = torch.cat(outs) == y.unsqueeze(1)
    pop = torch.bincount(train_y).argsort(descending=True)[:50]
    return {"recall_10": round(hit[:, :10].any(1).float().mean().item(), 5),
            "recall_50": round(hit.any(1).float().mean().item(), 5),
            "baseline_recall_50": round(torch.isin(y, pop).float().mean().item(), 5),
            "log_loss": round(ce / len(y), 5)}


def train(a, rank, world):
    torch.set_num_threads(1)
    exp = json.load(open(a.experiment))
    tr = exp["training"]
    seed, batch = tr.get("seed", 1), tr["batch_size"]
    epochs = a.epochs or tr.get("epochs", 1)
    torch.manual_seed(seed)
    y, cols, dense = load(exp, exp["data"]["train"]["images"])
    test = load(exp, exp["data"]["eval"]["images"], {k: c.width for k, c in cols.items()})
    model = Twin(exp, cols, dense.shape[1])
    net = model
    if world > 1:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        dist.init_process_group("gloo", rank=rank, world_size=world)
        net = DistributedDataParallel(model)
    opts = optimizers(exp, model)
    sigmoid = exp["model"]["loss"] == "sigmoid_cross_entropy"
    gen = torch.Generator().manual_seed(seed)
    steps, t0 = 0, time.perf_counter()
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=gen)[rank::world]
        for s in range(0, len(order) - batch + 1 if world > 1 else len(order), batch):
            idx = order[s:s + batch]
            z = net(*batch_of(cols, dense, idx))
            loss = F.binary_cross_entropy_with_logits(z.reshape(-1), y[idx].float()) if sigmoid else \
                F.cross_entropy(z, y[idx])
            for o in opts:
                o.zero_grad(set_to_none=True)
            loss.backward()
            for o in opts:
                o.step()
            steps += 1
    secs = time.perf_counter() - t0
    out = {"steps": steps, "train_s": round(secs, 2), "examples_per_s": round(steps * batch * world / secs)}
    if rank == 0:
        out.update(evaluate(exp, model, test, y))
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    if world > 1:
        import torch.distributed as dist
        rss = torch.tensor([out["peak_rss_mib"]])
        dist.all_reduce(rss, op=dist.ReduceOp.MAX)
        out["peak_rss_mib"] = int(rss.item())
        dist.destroy_process_group()
    if rank <= 0:
        print(json.dumps(out), flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    a = parse_args()
    if a.workers <= 1:
        return train(a, 0, 1)
    if a.rank >= 0:
        return train(a, a.rank, a.workers)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, __file__] + sys.argv[1:] + ["--rank", str(r)], env=env)
             for r in range(a.workers)]
    codes = [p.wait() for p in procs]
    if any(codes):
        sys.exit(f"torch_recsys: worker exit codes {codes}")


if __name__ == "__main__":
    main()
