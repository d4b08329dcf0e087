"""steps_never_back.py METRICS [WORKERS MIN_STEP]: exit 0 when no worker's train step goes back in METRICS (no
rollback); with WORKERS and MIN_STEP, also that that many workers reported and one reached MIN_STEP. lib.sh's
steps_never_back."""
import json, sys
last = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("kind") == "train":
        w = r.get("worker", 0)
        if r["step"] < last.get(w, -1): sys.exit(1)
        last[w] = r["step"]
if len(sys.argv) > 3:
    sys.exit(0 if len(last) == int(sys.argv[2]) and max(last.values()) >= int(sys.argv[3]) else 1)
