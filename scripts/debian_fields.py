#!/usr/bin/env python3
"""The Debian-packages set per field, for tfx's feature columns: predict a package's Section from its other
fields, as read by `apt-cache dumpavail` on this machine (real data nobody here wrote).

    python3 scripts/debian_fields.py OUT_DIR [--min-count 300] [--libsvm BITS]

Writes OUT_DIR/train.csv and OUT_DIR/test.csv (a header, one package per row) and OUT_DIR/meta.json (the classes).
Columns: label (the index of the Section among the sections with >= min-count packages, sorted by name; other
packages are dropped), name (the words of Package, split on - . +), maintainer, depends (the names in Depends and
Pre-Depends), recommends (Recommends and Suggests), tags (the debtags), desc (the words of the synopsis),
priority, multiarch, arch, home (Homepage's host), size (log2 of 1 + Installed-Size, a number) and size_bucket
(its integer part, a category). Multi-valued cells separate their values with a space. The split is the one of
the acceptance set (test: crc32(package name) mod 5 == 0), so accuracies compare. With --libsvm BITS, also
OUT_DIR/{train,test}.libsvm: every (column, value) of a row as one hashed feature, 1 + crc32("column=value") mod
2^BITS, value 1 (the bag-of-fields form PyTorch's EmbeddingBag and tfx's LibSVM reader both read)."""
import csv, json, math, os, re, subprocess, sys, zlib
from collections import Counter

SPLIT = re.compile(r"[^a-z0-9]+")
COLUMNS = ["label", "name", "maintainer", "depends", "recommends", "tags", "desc", "priority", "multiarch", "arch",
           "home", "size", "size_bucket"]


def packages():
    out = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True).stdout
    for block in out.split("\n\n"):
        rec = {}
        for line in block.splitlines():
            if line[:1] in (" ", "\t"):
                continue
            key, _, val = line.partition(":")
            rec[key] = val.strip()
        if "Package" in rec and "Section" in rec:
            yield rec


def names(rec, *fields):
    out = []
    for field in fields:
        for dep in re.split(r"[,|]", rec.get(field, "")):
            name = dep.strip().split(" ")[0].split(":")[0]
            if name and name not in out:
                out.append(name)
    return " ".join(out)


def row(rec, label):
    size = int(rec["Installed-Size"]) if rec.get("Installed-Size", "").isdigit() else 0
    home = re.match(r"https?://([^/]+)", rec.get("Homepage", ""))
    return {
        "label": label,
        "name": " ".join(w for w in SPLIT.split(rec["Package"].lower()) if w),
        "maintainer": rec.get("Maintainer", "").lower().replace(" ", "_"),
        "depends": names(rec, "Depends", "Pre-Depends"),
        "recommends": names(rec, "Recommends", "Suggests"),
        "tags": " ".join(t.strip() for t in rec.get("Tag", "").split(",") if t.strip()),
        "desc": " ".join(w for w in SPLIT.split(rec.get("Description", "").lower()) if len(w) > 1),
        "priority": rec.get("Priority", ""),
        "multiarch": rec.get("Multi-Arch", ""),
        "arch": rec.get("Architecture", ""),
        "home": home.group(1).lower() if home else "",
        "size": round(math.log2(1 + size), 3),
        "size_bucket": int(math.log2(1 + size)),
    }


def libsvm_line(r, bits):
    feats = set()
    for col in COLUMNS[1:]:
        if col == "size":
            continue
        for v in str(r[col]).split(" ") if col in MULTI else [str(r[col])]:
            if v:
                feats.add(1 + (zlib.crc32(f"{col}={v}".encode()) & ((1 << bits) - 1)))
    return f"{r['label']} " + " ".join(f"{f}:1" for f in sorted(feats)) + "\n"


MULTI = {"name", "depends", "recommends", "tags", "desc"}


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help") or sys.argv[1].startswith("-"):
        sys.exit(__doc__)  # an option where OUT belongs is not a directory to write into
    out = sys.argv[1]
    min_count = int(sys.argv[sys.argv.index("--min-count") + 1]) if "--min-count" in sys.argv else 300
    recs = {}
    for rec in packages():
        recs.setdefault(rec["Package"], rec)
    if len(recs) < 1000:
        sys.exit(f"apt-cache dumpavail lists {len(recs)} packages: run 'apt-get update' first")
    section = lambda r: r["Section"].split("/")[-1]
    counts = Counter(section(r) for r in recs.values())
    classes = sorted(s for s, c in counts.items() if c >= min_count)
    label = {s: i for i, s in enumerate(classes)}
    os.makedirs(out, exist_ok=True)
    files = {s: open(os.path.join(out, f"{s}.csv"), "w", newline="") for s in ("train", "test")}
    writers = {s: csv.DictWriter(f, COLUMNS) for s, f in files.items()}
    bits = int(sys.argv[sys.argv.index("--libsvm") + 1]) if "--libsvm" in sys.argv else 0
    svm = {s: open(os.path.join(out, f"{s}.libsvm"), "w") for s in ("train", "test")} if bits else {}
    n = Counter()
    for w in writers.values():
        w.writeheader()
    for name in sorted(recs):
        rec = recs[name]
        if section(rec) in label:
            split = "test" if zlib.crc32(name.encode()) % 5 == 0 else "train"
            r = row(rec, label[section(rec)])
            writers[split].writerow(r)
            if bits:
                svm[split].write(libsvm_line(r, bits))
            n[split] += 1
    for f in list(files.values()) + list(svm.values()):
        f.close()
    meta = {"classes": classes, "n_classes": len(classes), "train": n["train"], "test": n["test"],
            "columns": COLUMNS}
    json.dump(meta, open(os.path.join(out, "meta.json"), "w"), indent=1)
    print(json.dumps({k: v for k, v in meta.items() if k not in ("classes", "columns")}))


if __name__ == "__main__":
    main()
