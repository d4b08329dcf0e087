#!/usr/bin/python3
"""An endless click stream with drift, for data.train.follow (#28): Criteo-shaped rows (26 categorical fields, ids
drawn from a Zipf law (s = 1.1) over each field's live ids) written as LibSVM lines with hashed feature indices,
labelled by a planted logistic model whose weights move. Every "hour" a share of each field's ids retires and
as many new ids are born (at random popularity ranks), and every live weight takes a random-walk step, so a model
that stops learning falls behind. With --one-off-share S, each of a row's 26 ids is, with probability S, an id
never seen before or after (the long tail of a click log: a new user, a new ad), with its own planted weight.
Files land in OUT_DIR one at a time as written (.NAME.tmp renamed into place), at a chosen rate; OUT_DIR/.drift.jsonl
(a dot name: never read as data) gets a line per file with the Bayes AUC and log loss of its rows (the planted
probabilities: the best any model's rolling AUC can be on them). numpy (about 10x the pure Python writer).

    python3 scripts/drift_ctr.py OUT_DIR [--files 0 (endless)] [--rows 10000] [--files-per-hour 6]
        [--new-share 0.05] [--one-off-share 0] [--drift 0.05] [--live 20000] [--bits 20]
        [--rate 0 (files/s; 0: at once)] [--seed 1]

Train on it with "data": {"format": "libsvm", "train": {"follow": "OUT_DIR"}, "scale": 1} and an embedding_bag
over 2^bits ids with 2 units (softmax_cross_entropy) or 1 unit (sigmoid_cross_entropy)."""
import argparse, json, os, sys, time

try:
    import numpy as np
except ImportError:  # a python3 without numpy first on PATH (pyenv): the system's has it
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])
    sys.exit("drift_ctr.py needs numpy (python3 -m pip install numpy)")

FIELDS = 26


def auc(p, y):
    """The AUC of scores p for labels y (ties by order, as the Python writer counted them)."""
    pos = int(y.sum())
    neg = len(y) - pos
    if not pos or not neg:
        return float("nan")
    ranks = np.empty(len(p))
    ranks[np.argsort(p, kind="stable")] = np.arange(1, len(p) + 1)
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


class Field:
    """One categorical field: its live ids by popularity rank and each rank's planted weight."""

    def __init__(self, f, live, rng):
        self.f, self.rng, self.next_id = f, rng, live
        self.ids = np.arange(live, dtype=np.uint64)
        self.sd = 0.6 if f < 8 else 0.25
        self.w = rng.normal(0, self.sd, live)
        self.cum = np.cumsum(1 / np.arange(1, live + 1) ** 1.1)

    def hour(self, share, drift):
        """Retires a share of the ids (any rank) and gives their ranks to new ids; every weight walks."""
        n = int(len(self.ids) * share)
        ranks = self.rng.choice(len(self.ids), n, replace=False)
        self.ids[ranks] = np.arange(self.next_id, self.next_id + n, dtype=np.uint64)
        self.w[ranks] = self.rng.normal(0, self.sd, n)
        self.next_id += n
        self.w += self.rng.normal(0, drift * self.sd, len(self.w))
        return n

    def draw(self, k, one_off):
        """k ids and their weights; each with probability one_off a new id seen only here."""
        ranks = np.searchsorted(self.cum, self.rng.random(k) * self.cum[-1], side="right")
        ranks = np.minimum(ranks, len(self.ids) - 1)
        ids, w = self.ids[ranks].copy(), self.w[ranks].copy()
        once = self.rng.random(k) < one_off if one_off > 0 else np.zeros(k, bool)
        n = int(once.sum())
        ids[once] = np.arange(self.next_id, self.next_id + n, dtype=np.uint64)
        w[once] = self.rng.normal(0, self.sd, n)
        self.next_id += n
        return ids, w, n


def index(f, ids, bits):
    """The LibSVM feature indices of ids of field f: hashed into [1, 2^bits) (0 is left unused)."""
    with np.errstate(over="ignore"):
        h = np.uint64(f) * np.uint64(0x9E3779B97F4A7C15) + ids * np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(31)
    return 1 + h % np.uint64((1 << bits) - 1)


def lines_of(labels, idx, bits):
    """The file's LibSVM text: each row's indices sorted, written with as many digits as 2^bits has (leading
    zeros: the same numbers to any LibSVM reader) by array arithmetic instead of a string per id; a row with a hash
    collision (an index twice) is written as text with the index once."""
    idx = np.sort(idx, axis=1)
    rows, width = idx.shape[0], len(str(1 << bits))
    buf = np.full((rows, 2 + FIELDS * (width + 3)), ord(" "), dtype=np.uint8)
    buf[:, 0] = ord("0") + labels
    pos = 2 + np.arange(FIELDS)[:, None] * (width + 3) + np.arange(width)[None, :]  # [field, digit] columns
    digits = idx[:, :, None] // (10 ** np.arange(width - 1, -1, -1, dtype=np.uint64)) % np.uint64(10)
    buf[:, pos] = ord("0") + digits.astype(np.uint8)
    buf[:, pos[:, -1] + 1] = ord(":")
    buf[:, pos[:, -1] + 2] = ord("1")
    buf[:, -1] = ord("\n")
    dup = np.flatnonzero((idx[:, 1:] == idx[:, :-1]).any(axis=1))
    if not len(dup):
        return buf.tobytes()
    lines = [bytes(r) for r in buf]
    for r in dup.tolist():
        lines[r] = (f"{labels[r]} " + " ".join(f"{i}:1" for i in sorted(set(idx[r].tolist()))) + "\n").encode()
    return b"".join(lines)


def write_file(out, name, rows, fields, bias, bits, rng, one_off):
    cols = [fl.draw(rows, one_off) for fl in fields]
    z = bias + sum(w for _, w, _ in cols)
    q = 1 / (1 + np.exp(-z))
    y = (rng.random(rows) < q).astype(np.int64)
    idx = np.stack([index(f, ids, bits) for f, (ids, _, _) in enumerate(cols)], axis=1)
    tmp = os.path.join(out, f".{name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(lines_of(y, idx, bits))
    os.rename(tmp, os.path.join(out, name))
    eps = 1e-12
    ll = float(-np.mean(np.log(np.maximum(np.where(y == 1, q, 1 - q), eps))))
    return auc(q, y), ll, float(y.mean()), sum(n for _, _, n in cols)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--files", type=int, default=0)
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--files-per-hour", type=int, default=6)
    ap.add_argument("--new-share", type=float, default=0.05)
    ap.add_argument("--one-off-share", type=float, default=0.0)
    ap.add_argument("--drift", type=float, default=0.05)
    ap.add_argument("--live", type=int, default=20000)
    ap.add_argument("--bits", type=int, default=20)
    ap.add_argument("--rate", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    fields = [Field(f, a.live, rng) for f in range(FIELDS)]
    log = open(os.path.join(a.out, ".drift.jsonl"), "a")
    k = 0
    while not a.files or k < a.files:
        start = time.time()
        hour, new = k // a.files_per_hour, 0
        if k and k % a.files_per_hour == 0:
            new = sum(fl.hour(a.new_share, a.drift) for fl in fields)
        name = f"part-{k:08d}.libsvm"
        bayes_auc, bayes_ll, ctr, once = write_file(a.out, name, a.rows, fields, -1.5, a.bits, rng, a.one_off_share)
        rec = {"file": name, "hour": hour, "rows": a.rows, "new_ids": new, "one_off_ids": once, "ctr": round(ctr, 4),
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
