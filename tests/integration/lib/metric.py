"""metric.py FILE KIND FIELD: prints the FIELD of the last record of KIND in a metrics.jsonl ("none" if absent).
lib.sh's metric."""
import json, sys
path, kind, field = sys.argv[1:]
val = None
for line in open(path):
    rec = json.loads(line)
    if rec.get("kind") == kind and field in rec: val = rec[field]
print("none" if val is None else val)
