"""experiment.py SRC DST KEY=VALUE...: writes DST, a copy of the experiment SRC with dotted keys set (values
are JSON, else taken as strings). lib.sh's experiment."""
import json, sys
src, dst, *sets = sys.argv[1:]
exp = json.load(open(src))
for item in sets:
    key, _, raw = item.partition("=")
    try: val = json.loads(raw)
    except ValueError: val = raw
    node = exp
    *parents, leaf = key.split(".")
    for p in parents: node = node.setdefault(p, {})
    node[leaf] = val
json.dump(exp, open(dst, "w"), indent=1)
