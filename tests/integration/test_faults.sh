#!/bin/bash
# tfx-node local as a supervisor: kill -9 a worker, a ps, then the master in the middle of sync runs; each is
# restarted with its role and address (a log line names it), the cluster recovers (a lost ps rolls every ps back
# to the newest checkpoint; a new master adopts the live ps when they agree on a step, else resumes from it) and
# the run completes at max_steps with a model that learned.
. "$(dirname "$0")/lib.sh"
small_mlp "$WORK/exp.json" training.max_steps=1500 eval.every_steps=0 checkpoint.every_steps=200 \
  training.report_every=50 cluster.request_timeout_s=5 cluster.register_timeout_s=30 \
  cluster.replicas=0 # the roll-back path (replicas, auto on here, fail over instead: test_replicas*.sh)
run_with_kill() { # NAME ROLE INDEX LOGNAME (the role as logs name it)
  local run=$WORK/$1
  "$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$run" >"$WORK/$1.log" 2>&1 &
  local lp=$!
  PIDS+=($lp)
  # Killed past step 450 with a complete checkpoint (200 or 400) behind it: recovery has something to go back to.
  past() { [ "$(metric "$run/metrics.jsonl" train step 2>/dev/null || echo 0)" -ge 450 ] 2>/dev/null; }
  wait_for 120 past || fail "$1: the run did not reach step 450: $(tail -3 "$WORK/$1.log")"
  # The chief writes a checkpoint's manifest once every ps wrote its files: on a loaded machine that lags the steps.
  wait_for 120 has_ckpt "$run" || fail "$1: no complete checkpoint past step 450"
  local victim; victim=$(pid_of "$run" "$2" "$3")
  [ -n "$victim" ] || fail "$1: no $2 $3 process to kill"
  date +%s.%N >"$WORK/$1.killed"
  kill -9 "$victim"
  wait_exit 300 "$lp" || fail "$1: the run did not survive kill -9 of $2 $3: $(tail -3 "$WORK/$1.log")"
  grep -q "LOCAL-RESTART ${4:-$2} $3 exited with status 137" "$WORK/$1.log" || fail "$1: no restart logged for $2 $3"
  grep -q "LOCAL-RESPAWN ${4:-$2} $3: pid [0-9]* (restart 1 of 5)" "$WORK/$1.log" || fail "$1: $2 $3 was not started again"
  local step acc
  step=$(metric "$run/metrics.jsonl" eval step); acc=$(metric "$run/metrics.jsonl" eval accuracy)
  [ "$step" = 1500 ] || fail "$1: ended at step $step"
  ge "$acc" 0.8 || fail "$1: accuracy $acc"
  echo "$1: killed $2 $3, restarted, finished at $step with accuracy $acc"
}
# recovered NAME MARKER: after MARKER (the master's log ID for the recovery) every ps restored exactly the newest
# checkpoint the master had finished before it, and training went on from that checkpoint's step and loss: a ps
# restarted from scratch reports a step under 100 and a loss near the start's (over 1), not the checkpoint's.
recovered() {
  python3 - "$WORK/$1" "$2" "$(cat "$WORK/$1.killed")" <<'PY' || fail "$1: recovery after $2 did not continue from the checkpoint"
import datetime, glob, json, re, sys
run, marker, killed = sys.argv[1], sys.argv[2], float(sys.argv[3])
def when(line):
    stamp = datetime.datetime.strptime(line.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.replace(tzinfo=datetime.timezone.utc).timestamp()
ckpt = None
for line in open(run + "/logs/master-0.log"):
    if " " + marker + " " in line:
        break
    m = re.search(r"MASTER-CKPT checkpoint at step (\d+):", line)
    ckpt = int(m.group(1)) if m else ckpt
else:
    sys.exit("no %s line in master-0.log" % marker)
assert ckpt is not None and ckpt >= 200, "no checkpoint finished before %s: %s" % (marker, ckpt)
restored = []
for path in sorted(glob.glob(run + "/logs/ps-*.log")):
    want = r"PS-INIT .* step %d restored from .*ckpt-%012d/ps-\d+\.shard" % (ckpt, ckpt)
    hits = [when(l) for l in open(path) if re.search(want, l)]
    assert hits, "%s: no restore of checkpoint %d" % (path, ckpt)
    restored.append(hits[0])
train = [json.loads(l) for l in open(run + "/metrics.jsonl") if '"train"' in l]
before = [r["loss"] for r in train if r["time"] < killed and ckpt - 100 <= r["step"] <= ckpt]
after = [r for r in train if r["time"] > max(restored)]
assert before and after, (len(before), len(after))
ref, first = sum(before) / len(before), after[0]
print("checkpoint %d restored; loss around it %.3f, first after recovery %.3f at step %d" % (ckpt, ref, first["loss"], first["step"]))
assert ckpt < first["step"] <= ckpt + 100, "first step after recovery %d, want in (%d, %d]" % (first["step"], ckpt, ckpt + 100)
assert first["loss"] <= ref + 0.3, "first loss after recovery %.3f, the checkpoint's %.3f" % (first["loss"], ref)
PY
}
# adopted NAME: the restarted master adopted the live ps (MASTER-ADOPT) at a step no earlier than the last one
# reported before the kill: no step the ps had taken was lost.
adopted() {
  python3 - "$WORK/$1" "$(cat "$WORK/$1.killed")" <<'PY' || fail "$1: the restarted master adopted the ps behind the kill"
import json, re, sys
run, killed = sys.argv[1], float(sys.argv[2])
m = re.search(r"MASTER-ADOPT every ps serves the plan at step (\d+)", open(run + "/logs/master-0.log").read())
train = [json.loads(l) for l in open(run + "/metrics.jsonl") if '"train"' in l]
last = max(r["step"] for r in train if r["time"] < killed)
print("adopted at step %s; the last report before the kill was at step %d" % (m.group(1), last))
assert int(m.group(1)) >= last, (m.group(1), last)
PY
}
run_with_kill worker worker 1
run_with_kill ps ps 0
grep -q "MASTER-PS-LOST" "$WORK"/ps/logs/master-0.log || fail "the master did not roll back after losing a ps"
recovered ps MASTER-PS-LOST
run_with_kill master chief 0 master
if grep -q "MASTER-ADOPT" "$WORK"/master/logs/master-0.log; then
  adopted master
else
  grep -q "MASTER-RESUME" "$WORK"/master/logs/master-0.log ||
    fail "the restarted master neither adopted the live ps nor resumed from a checkpoint"
  recovered master MASTER-RESUME
fi
pass "worker, ps and master each survived kill -9"
