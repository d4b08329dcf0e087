#!/usr/bin/env python3
"""An endless click stream with drift, for data.train.follow (#28): Criteo-shaped rows (26 categorical fields, ids
drawn from a Zipf law (s = 1.1) over each field's live ids) written as LibSVM lines with hashed feature indices,
labelled by a planted logistic model whose weights move. Every "hour" a share of each field's ids retires and
as many new ids are born (at random popularity ranks), and every live weight takes a random-walk step, so a model
that stops learning falls behind. Files land in OUT_DIR one at a time as written (.NAME.tmp renamed into place),
at a chosen rate; OUT_DIR/.drift.jsonl (a dot name: never read as data) gets a line per file with the Bayes AUC and log loss of its rows (the planted
probabilities: the best any model's rolling AUC can be on them). Pure Python.

    python3 scripts/drift_ctr.py OUT_DIR [--files 0 (endless)] [--rows 10000] [--files-per-hour 6]
        [--new-share 0.05] [--drift 0.05] [--live 20000] [--bits 20] [--rate 0 (files/s; 0: at once)] [--seed 1]

Train on it with "data": {"format": "libsvm", "train": {"follow": "OUT_DIR"}, "scale": 1} and an embedding_bag
over 2^bits ids with 2 units (softmax_cross_entropy) or 1 unit (sigmoid_cross_entropy)."""
import argparse, itertools, json, math, os, random, sys, time

FIELDS = 26


def auc(p, y):
    order = sorted(range(len(p)), key=p.__getitem__)
    pos = sum(y)
    neg = len(y) - pos
    if not pos or not neg:
        return float("nan")
    rank_sum = sum(r + 1 for r, i in enumerate(order) if y[i])
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


class Field:
    """One categorical field: its live ids by popularity rank and each id's planted weight."""

    def __init__(self, f, live, rng):
        self.f, self.rng, self.next_id = f, rng, live
        self.ids = list(range(live))
        self.sd = 0.6 if f < 8 else 0.25
        self.w = {i: rng.gauss(0, self.sd) for i in self.ids}
        self.cum = list(itertools.accumulate(1 / (k + 1) ** 1.1 for k in range(live)))

    def hour(self, share, drift):
        """Retires a share of the ids (any rank) and gives their ranks to new ids; every weight walks."""
        n = int(len(self.ids) * share)
        for rank in self.rng.sample(range(len(self.ids)), n):
            del self.w[self.ids[rank]]
            self.ids[rank] = self.next_id
            self.w[self.next_id] = self.rng.gauss(0, self.sd)
            self.next_id += 1
        for i in self.w:
            self.w[i] += self.rng.gauss(0, drift * self.sd)
        return n

    def draw(self, k):
        return self.rng.choices(self.ids, cum_weights=self.cum, k=k)


def index(f, i, bits):
    """The LibSVM feature index of id i of field f: hashed into [1, 2^bits) (0 is left unused)."""
    h = (f * 0x9E3779B97F4A7C15 + i * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    h ^= h >> 31
    return 1 + h % ((1 << bits) - 1)


def write_file(out, name, rows, fields, bias, bits, rng):
    cols = [fl.draw(rows) for fl in fields]
    p, y, lines = [], [], []
    for r in range(rows):
        z = bias + sum(fields[f].w[cols[f][r]] for f in range(FIELDS))
        q = 1 / (1 + math.exp(-z))
        label = 1 if rng.random() < q else 0
        idx = sorted({index(f, cols[f][r], bits) for f in range(FIELDS)})
        lines.append(f"{label} " + " ".join(f"{i}:1" for i in idx))
        p.append(q)
        y.append(label)
    tmp = os.path.join(out, f".{name}.tmp")
    with open(tmp, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.rename(tmp, os.path.join(out, name))
    eps = 1e-12
    ll = -sum(math.log(max(q if t else 1 - q, eps)) for q, t in zip(p, y)) / rows
    return auc(p, y), ll, sum(y) / rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--files", type=int, default=0)
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--files-per-hour", type=int, default=6)
    ap.add_argument("--new-share", type=float, default=0.05)
    ap.add_argument("--drift", type=float, default=0.05)
    ap.add_argument("--live", type=int, default=20000)
    ap.add_argument("--bits", type=int, default=20)
    ap.add_argument("--rate", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    fields = [Field(f, a.live, rng) for f in range(FIELDS)]
    log = open(os.path.join(a.out, ".drift.jsonl"), "a")
    k = 0
    while not a.files or k < a.files:
        start = time.time()
        hour, new = k // a.files_per_hour, 0
        if k and k % a.files_per_hour == 0:
            new = sum(fl.hour(a.new_share, a.drift) for fl in fields)
        name = f"part-{k:08d}.libsvm"
        bayes_auc, bayes_ll, ctr = write_file(a.out, name, a.rows, fields, -1.5, a.bits, rng)
        rec = {"file": name, "hour": hour, "rows": a.rows, "new_ids": new, "ctr": round(ctr, 4),
               "bayes_auc": round(bayes_auc, 4), "bayes_log_loss": round(bayes_ll, 4)}
        log.write(json.dumps(rec) + "\n")
        log.flush()
        print(json.dumps(rec), flush=True)
        k += 1
        if a.rate > 0:
            time.sleep(max(0.0, 1 / a.rate - (time.time() - start)))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
