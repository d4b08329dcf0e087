"""ckpt_digest.py CKPT_DIR [--no-slots | --rows]: one line per tensor of a checkpoint, optimizer slots included: each shard
entry (values "KEY", slots "KEY@SLOT") by name and row range with the sha256 of its float32 bytes, and each lazy
table of the row files with its row count and the sha256 of its rows sorted by id. An incremental checkpoint's row
files are read with their chain (the parent's rows first, then each delta's changed rows over them and its deleted
ids taken out), read here independently of src/store. Two checkpoints hold the same state, Adagrad/Adam slots
included, when their digests are equal; what `export` leaves out (slots) is thus compared too. Exits 1 naming the
file on a malformed checkpoint or one that holds no tensor. --no-slots leaves the slot entries (and the rows' slot
floats cannot be split from the values, so rows are kept whole) out: for runs whose slots differ by design. --rows
prints instead one line per row of the lazy tables: the table, the id and the sha256 of its floats (values and
slots), sorted."""
import hashlib, os, re, struct, sys


def die(msg):
    print(f"ckpt_digest: {msg}", file=sys.stderr)
    sys.exit(1)


class Reader:
    def __init__(self, path):
        self.path, self.b, self.o = path, open(path, "rb").read(), 0

    def take(self, n):
        if self.o + n > len(self.b):
            die(f"{self.path}: truncated at offset {self.o}")
        v = self.b[self.o:self.o + n]
        self.o += n
        return v

    def u(self, fmt):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))[0]


def shard_entries(path):
    r = Reader(path)
    if r.take(8) != b"TFXSHRD1":
        die(f"{path}: not a shard file")
    r.u("I")
    n = r.u("I")
    r.u("q")
    out = []
    for _ in range(n):
        name = r.take(r.u("H")).decode()
        rank = r.u("I")
        dims = [r.u("q") for _ in range(rank)]
        lo, hi = r.u("q"), r.u("q")
        r.u("Q")  # version: how many updates the ps applied, not state
        nbytes = r.u("Q")
        r.u("I")
        out.append((name, dims, lo, hi, hashlib.sha256(r.take(nbytes)).hexdigest()))
    return out


def rowfile(path):
    """(step, parent, {table: (ids, row_floats, half, deleted ids, {id: row bytes})})."""
    r = Reader(path)
    if r.take(8) != b"TFXROWS1":
        die(f"{path}: not a row file")
    fmt = r.u("I")
    half, version = bool(fmt & 0x100), fmt & 0xff
    n = r.u("I")
    step = r.u("q")
    parent = r.u("q") if version == 2 else -1
    tables = {}
    for _ in range(n):
        name = r.take(r.u("H")).decode()
        ids, width = r.u("q"), r.u("I")
        deleted = [r.u("q") for _ in range(r.u("Q"))] if version == 2 else []
        rows = {}
        for _ in range(r.u("Q")):
            i = r.u("q")
            rows[i] = r.take(width * (2 if half else 4))
        tables[name] = (ids, width, half, deleted, rows)
    return step, parent, tables


def rows_of(ckpt, rows_name, depth=0):
    """The rows of ps file rows_name in checkpoint dir ckpt, its chain applied: {table: {id: bytes}}."""
    if depth > 1000:
        die(f"{ckpt}/{rows_name}: a chain of more than 1000 links")
    step, parent, tables = rowfile(os.path.join(ckpt, rows_name))
    base = {}
    if parent >= 0:
        base = rows_of(os.path.join(os.path.dirname(ckpt), "ckpt-%012d" % parent), rows_name, depth + 1)
    for name, (_, _, _, deleted, rows) in tables.items():
        t = base.setdefault(name, {})
        for i in deleted:
            t.pop(i, None)
        t.update(rows)
    return base


def main():
    ckpt = sys.argv[1]
    slots = "--no-slots" not in sys.argv[2:]
    if not os.path.isfile(os.path.join(ckpt, "manifest.json")):
        die(f"{ckpt}: no manifest.json (not a checkpoint)")
    lines = []
    for f in sorted(os.listdir(ckpt)):
        if re.fullmatch(r"ps-[0-9]+\.shard", f):
            for name, dims, lo, hi, h in shard_entries(os.path.join(ckpt, f)):
                if slots or "@" not in name:
                    lines.append(f"{name} {dims} rows {lo}-{hi} {h}")
    tables = {}
    for f in sorted(os.listdir(ckpt)):
        if re.fullmatch(r"ps-[0-9]+\.rows", f):
            for name, rows in rows_of(ckpt, f).items():
                var = re.sub(r"/(mod|range)_[0-9]+$", "", name)  # a table's partitions, on any ps, are one table
                tables.setdefault(var, {}).update(rows)
    if "--rows" in sys.argv[2:]:
        print("\n".join(f"{var} {i} {hashlib.sha256(r).hexdigest()}" for var, rows in sorted(tables.items())
                        for i, r in sorted(rows.items())))
        return
    for var, rows in sorted(tables.items()):
        h = hashlib.sha256()
        for i in sorted(rows):
            h.update(struct.pack("<q", i) + rows[i])
        lines.append(f"{var} rows {len(rows)} {h.hexdigest()}")
    if not lines:
        die(f"{ckpt}: no tensor")
    print("\n".join(sorted(lines)))


main()
