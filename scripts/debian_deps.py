#!/usr/bin/env python3
"""debian_deps.py OUT [--items 4096]: Debian's dependency graph (this machine's `apt-cache dumpavail`) as a
retrieval set, for examples/debian_two_tower.json.

Each pair is (a package's fields -> one package it Depends on): the query is the package's section, priority,
maintainer, debtags and the words of its short description; the item is the dependency (its first alternative,
without version or architecture). Packages are split, not pairs: a package whose name hashes to 0 mod 5 is a test
package, so the test queries are packages the model never saw. Items are numbered by how many training packages
depend on them, most depended-on first (label 0 is the most popular), so a popularity ranking is the labels' own
order; only the --items most depended-on items are kept (ties by name; the example's item tower has that many
rows), with their pairs (the test pairs of the other items are counted and printed). Writes OUT/train.csv and
OUT/test.csv (label,section,priority,maintainer,tags,desc; multi-valued cells joined by spaces) and OUT/items.txt
(the item of each label, one a line)."""
import collections, os, re, subprocess, sys, zlib


def stanzas(text):
    cur = {}
    key = None
    for line in text.splitlines():
        if not line.strip():
            if cur:
                yield cur
            cur, key = {}, None
        elif line[0] in " \t" and key:
            cur[key] += " " + line.strip()
        elif ":" in line:
            key, _, val = line.partition(":")
            cur[key] = val.strip()
    if cur:
        yield cur


def deps_of(p):
    out = []
    for alt in p.get("Depends", "").split(","):
        name = alt.split("|")[0].strip().split(" ")[0].split(":")[0]
        if name and name not in out:
            out.append(name)
    return out


def clean(s):
    return re.sub(r"[^a-z0-9+.:_-]+", " ", s.lower()).strip()


def query(p):
    words = sorted(set(w for w in re.findall(r"[a-z0-9]+", p.get("Description", "").lower()) if len(w) > 2))
    tags = " ".join(t.strip() for t in p.get("Tag", "").split(",") if t.strip())
    maint = p.get("Maintainer", "").split("<")[0]
    return [clean(p.get("Section", "")), clean(p.get("Priority", "")), clean(maint).replace(" ", "_"), tags,
            " ".join(words)]


def main():
    out = sys.argv[1]
    n_items = int(sys.argv[sys.argv.index("--items") + 1]) if "--items" in sys.argv else 4096
    text = subprocess.run(["apt-cache", "dumpavail"], check=True, capture_output=True, text=True).stdout
    pkgs = {}
    for p in stanzas(text):
        if "Package" in p and p["Package"] not in pkgs:
            pkgs[p["Package"]] = p
    split = {n: "test" if zlib.crc32(n.encode()) % 5 == 0 else "train" for n in pkgs}
    count = collections.Counter(d for n, p in pkgs.items() if split[n] == "train" for d in deps_of(p))
    items = sorted(count, key=lambda d: (-count[d], d))[:n_items]
    label = {d: k for k, d in enumerate(items)}
    os.makedirs(out, exist_ok=True)
    written = collections.Counter()
    dropped = 0
    with open(f"{out}/train.csv", "w") as tr, open(f"{out}/test.csv", "w") as te:
        for f in (tr, te):
            f.write("label,section,priority,maintainer,tags,desc\n")
        for n in sorted(pkgs):
            q = ",".join(query(pkgs[n]))
            for d in deps_of(pkgs[n]):
                if d not in label:
                    dropped += split[n] == "test"
                    continue
                (te if split[n] == "test" else tr).write(f"{label[d]},{q}\n")
                written[split[n]] += 1
    with open(f"{out}/items.txt", "w") as f:
        f.write("\n".join(items) + "\n")
    print(f"{len(pkgs)} packages, {len(items)} items (the most depended-on, by >= {count[items[-1]]} training "
          f"packages), {written['train']} training pairs, {written['test']} test pairs ({dropped} test pairs of "
          "other items left out)")


main()
