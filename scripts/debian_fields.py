#!/usr/bin/env python3
"""The Debian-packages set per field, for tfx's feature columns: predict a package's Section from its other
fields, as read by `apt-cache dumpavail` on this machine (real data nobody here wrote).

    python3 scripts/debian_fields.py OUT_DIR [--min-count 300]

Writes OUT_DIR/train.csv and OUT_DIR/test.csv (a header, one package per row) and OUT_DIR/meta.json (the classes).
Columns: label (the index of the Section among the sections with >= min-count packages, sorted by name; other
packages are dropped), name (the words of Package, split on - . +), maintainer, depends (the names in Depends and
Pre-Depends), recommends (Recommends and Suggests), tags (the debtags), desc (the words of the synopsis),
priority, multiarch, arch, home (Homepage's host), size (log2 of 1 + Installed-Size, a number) and size_bucket
(its integer part, a category). Multi-valued cells separate their values with a space. The split is the one of
the acceptance set (test: crc32(package name) mod 5 == 0), so accuracies compare."""
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


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
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
    n = Counter()
    for w in writers.values():
        w.writeheader()
    for name in sorted(recs):
        rec = recs[name]
        if section(rec) in label:
            split = "test" if zlib.crc32(name.encode()) % 5 == 0 else "train"
            writers[split].writerow(row(rec, label[section(rec)]))
            n[split] += 1
    for f in files.values():
        f.close()
    meta = {"classes": classes, "n_classes": len(classes), "train": n["train"], "test": n["test"],
            "columns": COLUMNS}
    json.dump(meta, open(os.path.join(out, "meta.json"), "w"), indent=1)
    print(json.dumps({k: v for k, v in meta.items() if k not in ("classes", "columns")}))


if __name__ == "__main__":
    main()
