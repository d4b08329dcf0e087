#!/usr/bin/env python3
"""A synthetic click-through set shaped like Criteo's: 13 numeric fields (I1..I13, log-normal counts, 10% missing)
and 26 categorical fields (C1..C26, ids drawn from a Zipf law (s = 1.1) over a vocabulary of 10 to 10^6 values per
field, written as 8-hex-digit tokens as Criteo writes them), labelled by a planted logistic model: a bias, a weight
per categorical value, weights on the log numeric fields and one planted interaction (C1 x C2). Prints the Bayes
AUC (the planted probabilities' AUC on the test rows): no model can do better on this data. Pure Python.

    python3 scripts/synth_ctr.py OUT_DIR [--train 200000] [--test 50000] [--seed 1]

Writes OUT_DIR/train.csv and OUT_DIR/test.csv (header: label,I1..I13,C1..C26) and OUT_DIR/meta.json."""
import argparse, itertools, json, math, os, random


def auc(p, y):
    order = sorted(range(len(p)), key=p.__getitem__)
    pos = sum(y); neg = len(y) - pos
    rank_sum = sum(r + 1 for r, i in enumerate(order) if y[i])
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out"); ap.add_argument("--train", type=int, default=200000)
    ap.add_argument("--test", type=int, default=50000); ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    n = a.train + a.test
    vocab = [int(10 ** (1 + 5 * f / 25)) for f in range(26)]
    cols, logit = [], [-1.5] * n
    for f in range(26):
        cum = list(itertools.accumulate(1 / (k + 1) ** 1.1 for k in range(vocab[f])))
        ids = rng.choices(range(vocab[f]), cum_weights=cum, k=n)
        w = [rng.gauss(0, 0.6 if f < 8 else 0.25) for _ in range(vocab[f])]
        for r in range(n):
            logit[r] += w[ids[r]]
        cols.append(ids)
    inter = [[rng.gauss(0, 0.8) for _ in range(64)] for _ in range(vocab[0])]
    wn = [rng.gauss(0, 0.3) for _ in range(13)]
    nums = []
    for r in range(n):
        row = [rng.lognormvariate(1.0, 1.2) for _ in range(13)]
        logit[r] += inter[cols[0][r]][cols[1][r] % 64] + sum(w * (math.log1p(x) - 1.2) for w, x in zip(wn, row))
        nums.append(row)
    p = [1 / (1 + math.exp(-z)) for z in logit]
    y = [int(rng.random() < q) for q in p]
    salt = [rng.getrandbits(32) for _ in range(26)]
    os.makedirs(a.out, exist_ok=True)
    header = "label," + ",".join(f"I{i}" for i in range(1, 14)) + "," + ",".join(f"C{i}" for i in range(1, 27))
    for name, lo, hi in (("train", 0, a.train), ("test", a.train, n)):
        with open(os.path.join(a.out, f"{name}.csv"), "w") as f:
            f.write(header + "\n")
            for r in range(lo, hi):
                ints = ("" if rng.random() < 0.1 else str(int(x)) for x in nums[r])
                toks = (f"{(cols[c][r] * 2654435761 + salt[c]) % (1 << 32):08x}" for c in range(26))
                f.write(f"{y[r]}," + ",".join(ints) + "," + ",".join(toks) + "\n")
    meta = {"train": a.train, "test": a.test, "positive_rate": round(sum(y) / n, 4),
            "bayes_auc": round(auc(p[a.train:], y[a.train:]), 4), "vocab": vocab, "seed": a.seed}
    json.dump(meta, open(os.path.join(a.out, "meta.json"), "w"), indent=1)
    print(json.dumps({k: v for k, v in meta.items() if k != "vocab"}))


if __name__ == "__main__":
    main()
