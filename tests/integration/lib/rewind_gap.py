"""rewind_gap.py RUN: the seconds from the chief's last roll-back (MASTER-RESUME after MASTER-PS-LOST or
MASTER-PS-APART in RUN/logs/master-0.log) to the slowest worker's WORKER-REWIND after it (every RUN/logs/worker-*.log): how long the
cluster stood still once the ps were back. Prints the gap and each worker's; exits 1 naming what is missing."""
import glob, re, sys
from datetime import datetime

run = sys.argv[1]


def when(line):
    return datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f").timestamp()


master = open(f"{run}/logs/master-0.log").read().splitlines()
lost = [i for i, l in enumerate(master) if "MASTER-PS-LOST" in l or "MASTER-PS-APART" in l]
resume = [when(l) for l in master[lost[-1]:] if "MASTER-RESUME" in l] if lost else []
if not resume:
    sys.exit("no MASTER-RESUME after a MASTER-PS-LOST or MASTER-PS-APART in master-0.log")
gaps = {}
for path in sorted(glob.glob(f"{run}/logs/worker-*.log")):
    rewinds = [when(l) for l in open(path) if "WORKER-REWIND" in l and when(l) >= resume[0]]
    if not rewinds:
        sys.exit(f"{path}: no WORKER-REWIND after the roll-back")
    gaps[path.rsplit("/", 1)[1]] = rewinds[0] - resume[0]
print(f"{max(gaps.values()):.1f} s (" + ", ".join(f"{w} {g:.1f} s" for w, g in gaps.items()) + ")")
