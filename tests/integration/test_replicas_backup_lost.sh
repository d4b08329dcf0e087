#!/bin/bash
# A ps that holds backups only, lost and back (cluster.replicas 1, #27): ps 0 is killed, its backup on ps 1 is
# promoted, and ps 0 rejoins as the backup of both instances (served by ps 1); killed again, it holds no
# instance the master polls, so only ps 1's primaries see it go (PS-BACKUP-LOST): the master marks it lost from
# their status (MASTER-BACKUP-LOST), asks after it, and streams it both backups again when it is back (before, it
# sat empty and the run stayed degraded). Then ps 1 is killed: both instances fail over to ps 0, with no roll-back,
# and the sync LR (2 ps, 2 workers) trains to max_steps, its final checkpoint (Adagrad's slots included) bit-identical
# to the same-seed run's undisturbed: a re-streamed backup with stale rows, promoted, would differ.
. "$(dirname "$0")/lib.sh"
MAX=6000
python3 "$(dirname "$0")/sparse_data.py" "$WORK" --train 2000 --test 200
sparse_lr_experiment "$WORK/lr.json" training.report_every=20
# start NAME: the run, in the background (LP)
start() {
  start_local "$1" --config "$WORK/lr.json" --run-dir "$WORK/$1" --max-steps $MAX --set cluster.replicas=1 \
    --set training.seed=7 --set checkpoint.every_steps=500 --set cluster.request_timeout_s=20
}
start calm
wait_and_digest calm "$LP" "$WORK/calm"
run=$WORK/run
start run
lp=$LP
python3 - "$WORK/run.log" "$run" "$lp" "$PYLIB" <<'PY' || fail "the kills did not happen before the run ended"
import glob, json, os, re, signal, sys, time
log, run, lp = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, sys.argv[4])
from cluster_pid import pid_of as task_pid
def count(word):
    return sum(open(f).read().count(word) for f in glob.glob(run + "/logs/*.log"))
def wait(cond):
    while not cond():
        os.kill(lp, 0)  # the run ended: OSError, exit 1
        time.sleep(0.05)
def step():
    try:
        return max([json.loads(l).get("step", 0) for l in open(run + "/metrics.jsonl") if '"train"' in l], default=-1)
    except (OSError, ValueError):
        return -1
def pid_of(kind, index):  # the supervisor's child for that task (a restarted one too)
    return task_pid(lp, kind, index)
def kill(kind, index):  # the workers held meanwhile, so that the kill lands at the step seen
    wait(lambda: pid_of(kind, index) is not None and None not in (pid_of("worker", 0), pid_of("worker", 1)))
    p, workers = pid_of(kind, index), [pid_of("worker", 0), pid_of("worker", 1)]
    for w in workers:
        os.kill(w, signal.SIGSTOP)
    at = step()
    os.kill(p, signal.SIGKILL)
    for w in workers:
        os.kill(w, signal.SIGCONT)
    print(f"{kind} {index} (pid {p}) killed at step {at}", flush=True)
wait(lambda: step() >= 200)
kill("ps", 0)
wait(lambda: count("MASTER-REREPLICATED") >= 2)
s = step()
wait(lambda: step() >= s + 100)
kill("ps", 0)
wait(lambda: count("MASTER-REREPLICATED") >= 4)
s = step()
wait(lambda: step() >= s + 100)
kill("ps", 1)
PY
wait_and_digest run "$lp" "$run"
[ "$(metric "$run/metrics.jsonl" train step)" -ge $((MAX - 20)) ] || fail "did not train to $MAX"
grep -q "MASTER-BACKUP-LOST ps 0, which held backups only, is lost" "$run"/logs/master-0.log ||
  fail "the master did not see ps 0 lost as a backup: $(grep -h 'MASTER-\(BACKUP\|REREP\)' "$run"/logs/master-0.log)"
grep -q "MASTER-FAILOVER ps 1 lost" "$run"/logs/master-0.log || fail "ps 1's instance did not fail over to ps 0"
grep -hiE 'MASTER-PS-LOST|MASTER-NO-FAILOVER' "$run"/logs/*.log && fail "rolled back"
steps_never_back "$run/metrics.jsonl" || fail "a worker's step went back"
cmp -s "$WORK/calm.digest" "$WORK/run.digest" ||
  fail "the state differs from the undisturbed run's: $(diff "$WORK/calm.digest" "$WORK/run.digest" | head -6)"
pass "ps 0 lost twice (the second time holding backups only) and re-replicated each time; then ps 1 failed over to it; $MAX steps, no roll-back, weights and slots bit-identical to the undisturbed run"
