"""train_sum.py METRICS FIELD: prints the sum over the workers of their last FIELD in the train records of a
metrics.jsonl (an int; -1 when none has one yet, or the file is not there yet)."""
import json, sys
last = {}
try:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if r.get("kind") == "train" and sys.argv[2] in r: last[r["worker"]] = r[sys.argv[2]]
except OSError: pass
print(int(sum(last.values())) if last else -1)
